// Package chaos is purrfly's chaos soak (`purrctl chaos`, and
// TestChaosSoak in the suite): rooms of real clients play through a flysim
// organisation (fly/chaos.toml) while faults are injected one at a time,
// and invariants are checked throughout and reported as figures.
//
// # Shape
//
//	Run ──> flysim organisation (in this process, or attached by its state file)
//	    ├── workload (workload.go): Rooms slots, each playing one room after
//	    │     another: allocate (a fresh name), host, players through /join,
//	    │     players send every 200 ms and the host echoes, until the room's
//	    │     lifetime ends (the host leaves) or a fault closes the host's socket
//	    ├── views (views.go): every second, every started relay machine's own
//	    │     rooms (wire.PathRelayRooms, on its private address)
//	    ├── scheduler (faults.go): one fault at a time, seeded RNG, first every
//	    │     kind once (shuffled), then at random; waits until it healed, then
//	    │     the recovery audit (audit.go), then a pause
//	    └── after the storm: heal, start every machine, close rooms, baseline
//	          (baseline.go), secrets scan of every machine log (secrets.go),
//	          Report (report.go)
//
// Everything the soak does to the organisation goes over the network, as an
// operator's tools would: the Machines API (signal, stop, start, wait,
// list) and flysim's fault route (/flysim/v1/faults: network faults), the
// balancer's public and admin API, the relays' private routes. So `purrctl
// chaos --state` drives a `purrctl sim` in another process exactly as Run
// drives its own. It keeps Fly's Machines API manners: a rate-limited call
// (429) is sent again after its Retry-After, and an app's machines are
// listed at most once a second, one listing shared by every caller
// (fleet.go's listCache).
//
// # Faults (each bounded in time; the fleet is whole again after each)
//
//   - relay_kill, balancer_kill: SIGKILL the machine's process group
//     (Machines API signal); its restart policy (on-failure) starts a new
//     process, as Fly does; the soak starts it itself if no policy does.
//   - machine_stop: stop a relay machine (kill_signal: the relay drains,
//     closes its rooms, unregisters), start it again 1 to 5 s later.
//   - link_delay, link_drop: one direction between the balancer and a
//     single-machine relay (flysim links: the relay's BALANCER_URL and its
//     MACHINE_ENDPOINT go through them) delayed 100 to 1000 ms per chunk,
//     or cut (open connections closed, new ones refused) for 2 to 8 s.
//   - partition: both directions of one relay black-holed for 3 to 12 s
//     (longer than the balancer's removal: the relay is removed, then
//     registers again and republishes).
//   - dns_stale: the multi-machine relay app's .internal answers frozen for
//     5 to 12 s while one of its machines stops and starts.
//   - host_down (hostdown.go; a fleet whose balancer has a standby): the
//     serving balancer's host fails (flysim: processes gone without a
//     signal, addresses silent), Fly starts the standby; 5 to 15 s later
//     the host returns and the two settle on the primary.
//   - partition_rival (opt-in, Options.Rival, `--rival`; rival.go): a
//     relay hosting a live room is partitioned long enough to be removed,
//     and a second host allocates that room's name (PurrNet reuses a
//     scene's name on every Play) and hosts it elsewhere. Two machines
//     then host one name, which nobody can prevent while the partition
//     lasts; its samples are counted (rival_split_samples), not violations.
//     What must hold: within recoverBound of the heal one machine hosts it.
//
// # Invariants (violations counted, never a stop at the first)
//
//   - room_on_two_machines: in no views sample is one name hosted (a host
//     attached) on two machines (a partition_rival's name: not after its
//     heal plus recoverBound).
//   - room_lost_with_host: after every fault, each room whose host is still
//     connected is, within recoverBound, hosted on one machine, handed out
//     by /join, and a new player's message comes back from its host.
//   - dead_room_socket_open: once a room's host socket closed (the host
//     left, or its machine died or drained), every player socket of the
//     room is closed by the relay within socketBound.
//   - join_to_unserved_room: for a room whose host socket closed without
//     the host leaving, /join may answer it while a live machine lists it,
//     and for at most joinBound after none does.
//   - goroutine_or_fd_leak: after the storm, each app's go_goroutines and
//     process_open_fds (summed over its machines; purrctl registers the Go
//     and process collectors) and this process's goroutines and open fds
//     are back within tolerance of the figures before it.
//   - secret_in_log: no machine log line holds the shared secret, the
//     Machines API token, "secret=", "\"secret\":\"" or "Bearer ".
//   - traffic_corrupted: every echo a player gets is one it sent.
//   - allocation_failed_on_purrnet_schedule, balancers_not_settled: across
//     a host_down, an allocation on PurrNet's schedule (10 tries, 1 s apart)
//     succeeds once the host failed and once it returned, and within 60 s
//     of its return exactly the primary runs.
//
// Bounds derive from the organisation's configured intervals (fleet.go
// reads them from the config's env), not from guesses: joinBound is
// HealthFailures x (HealthInterval + HealthTimeout) + 2 x Heartbeat (the
// balancer's removal of a relay that stopped answering, or a cut relay's
// removals after its link heals); recoverBound adds 10 s for a process to
// restart and pass its checks. The report prints each bound beside the
// worst case observed.
//
// # Bounds of the soak itself
//
// Room slots, players, messages per room, incarnations per slot and
// faults are capped (workload.go, Options); every wait has a deadline; the
// storm ends at Duration (the first round of fault kinds may outlast it).
//
// # Ownership
//
// Options and fleet are static once Run starts them. The ledger (every
// count and violation) is guarded by its mutex; views by its own (the
// sampler goroutine replaces its maps); the workload's live-room map by
// its mutex, each room owned by its slot goroutine except the atomic up;
// the scheduler's RNG by the scheduler goroutine.
package chaos
