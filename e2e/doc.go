// Package e2e holds purrfly's end-to-end tests. Every test boots a real
// balancer and real relays on ephemeral loopback ports (through devstack, or
// relay.New and balancer.New directly when a test must restart one on the
// same port) and drives them only through the Go PurrNet client (package
// client) and plain HTTP, as PurrNet's PurrTransport, a relay or an operator
// would. Nothing here reaches into relay or balancer internals: the tests
// state what a game developer, a player or an operator would notice.
//
// Files:
//   - harness_test.go: TestMain (goleak), stack builders, waitFor, raw HTTP
//     helpers, and a transport that fails a test whenever an answer carries
//     the shared SECRET (every balancer call of every test goes through it);
//   - rooms_test.go: hosts, clients and their expectations;
//   - proxy_test.go: a relay<->balancer link that records requests (to
//     replay a prior boot's) and can go down, and a transport that loses an
//     answer after the server committed;
//   - allocate_test.go, api_test.go: the public balancer API
//     (docs/PROTOCOL.md section 3);
//   - framing_test.go: the relay's WebSocket protocol (section 2), and
//     udp_test.go the same over UDP and in rooms that mix both transports;
//   - faults_test.go, registration_test.go: restarts, outages, lost answers
//     and forged heartbeats (the registration and publication rules);
//   - placement_test.go: labels and capacity of real relays;
//   - migration_test.go, migration_replay_test.go, vacant_test.go: host
//     migration over both transports (docs/MIGRATION.md), and a vacant
//     room's name taken by a new allocation;
//   - concurrency_test.go: racing allocations, 200 clients in 20 rooms;
//   - badinput_test.go: malformed input and configuration;
//   - shutdown_test.go: relay drain and close code 1012;
//   - admin_test.go, dashboard_test.go: the admin API over real relays, and
//     the dashboard in a real headless Chromium;
//   - purrctl_test.go, sim_test.go: `purrctl dev`, `purrctl smoke` and
//     `purrctl sim` as a built binary (skipped with -short).
//
// Intervals are compressed (heartbeat 150 ms, health check 200 ms) so that
// "within one heartbeat" is observable in real time; waits poll with a
// deadline, never sleep for synchronization. The package has no non-test
// code; this file only makes the directory a package.
package e2e
