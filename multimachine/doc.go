// Package multimachine holds the end-to-end tests of multi-machine relay
// apps: a balancer and a relay app of several machines run as
// real `purrctl` processes under flysim (real proxy, real internal DNS,
// real Machines API driven with fly-go's flaps client), and the tests speak
// to them only through the Go PurrNet client, plain HTTP and the Machines
// API, as players, PurrNet and an operator would.
//
// What they show: rooms allocated through the balancer spread over the
// app's machines; hosts and clients connecting without a session hint (as
// PurrNet's own client does) land on random machines and still reach
// their room, with the right ids and notices, both ways, and a room whose
// host landed on another machine moved there; a scale-up keeps every room
// and takes new ones; a scale-down keeps the survivors' rooms with their
// hosts, closes only the clients that came in through a stopped machine,
// and reports the stopped machines' rooms gone (/join: room_not_found);
// a forwarded connection whose holder dies is closed at once.
//
// Files: main_test.go (TestMain: goleak, purrctl built once), fleet_test.go
// (the flysim fleet from testdata/fleet.toml on a loopback range of its
// own, Machines API and balancer helpers), games_test.go (rooms, hosts,
// clients and their exchanges), multimachine_test.go (the scenario). The
// package has no non-test code; this file only makes it a package.
package multimachine
