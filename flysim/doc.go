// Package flysim is a local Fly.io: an emulated organisation whose apps run
// real processes, driven through the same Machines API, proxy and internal DNS
// a deploy tool and a multi-machine app meet on Fly. It exists so that
// purrfly's Fly-specific behaviour (Fly-Replay routing, .internal discovery,
// lease/update/wait deploys, UDP on one machine per app) is tested against
// something faithful, with the real fly-go flaps client, instead of
// hand-written mocks; and so a studio can rehearse a rollout on a laptop.
// docs/FLYSIM.md says, call by call, what matches Fly, how the Sim can be
// made to fail, and what is simplified and why.
//
// # Shape
//
//	cfg, _ := flysim.LoadConfig("fly/sim.toml")
//	sim, _ := flysim.New(cfg, flysim.Options{LogDir: "sim-logs", Stdout: os.Stdout})
//	err := sim.Start(ctx) // binds API, DNS, proxies, UDP; starts machines; returns when they listen
//	st := sim.State()     // {"machines_api","token","dns","apps":{NAME:{"url","udp":{PORT:ADDR},"reserved"}}}
//	defer sim.Close()     // every process stopped per kill_signal/kill_timeout; nothing left
//
// One Sim owns:
//
//   - the Machines API server: machines (api.go, api_machines.go,
//     api_signal.go, api_metadata.go), leases (lease.go), apps (api_apps.go), IP
//     assignments (api_ips.go) and secrets (api_secrets.go, secrets.go),
//     the subset fly-go's flaps v0.8.0 calls, rendered with fly-go's own
//     machine types;
//   - one DNS server for .internal on UDP and TCP (dns.go), answering from
//     live state;
//   - one proxy per app for HTTP and WebSocket (proxy.go, routing.go,
//     tunnel.go), honouring Fly-Replay and Fly's routing headers;
//   - one UDP forwarder per UDP service of an app (udp.go, udp_flow.go,
//     udp_route.go, udp_config.go): one machine at a time receives all of
//     the service's datagrams, as on Fly;
//   - one fault link per [[links]] entry of the config (link.go), and the
//     injected faults (fault.go, netfault.go);
//   - hosts (host.go): each machine on one host of its region, never
//     moved; a failed host's processes are SIGKILLed, its addresses
//     black-holed (one listener each, closed on return), its machines'
//     standbys started by one timer goroutine per failure;
//   - per machine, one run goroutine (lifecycle.go) that alone owns the
//     machine's process (process.go and its platform files) and its checks
//     (checks.go), and applies its restart policy (restart.go).
//
// # Ownership and locks
//
//   - Sim: configuration, options, logger, clock, executable, log
//     directory and metrics are static after New; the API and DNS servers
//     are set once by Start. ctx is cancelled by Close, and every goroutine
//     of the Sim watches it and is counted in wg.
//   - Sim.mu guards every record: the apps and their order, each app's
//     created flag, secrets and IP assignments, each machine's state,
//     version, config, events, checks and lease, the addresses handed out,
//     the pids spawned, the armed faults and the frozen DNS answers. It is
//     the only lock of the records, and it is never held across a process
//     start, stop or wait, nor across a call to another server, nor across a
//     network write: a Machines API handler builds its answer in memory
//     (answer.go) and it is sent after the handler has unlocked. Proxies, links and UDP forwarders
//     each have a small lock of their own for their connections, never
//     taken while Sim.mu is held and never held while taking it.
//   - API handlers change records under Sim.mu and hand process work
//     (start, stop, restart, destroy) to the machine's run goroutine
//     through a bounded queue. Waiters sleep on a per-machine channel that
//     is closed at every change of the machine, and the UDP forwarders on a
//     per-app one.
//   - A proxy owns its tunnels (at most 2048 open WebSocket pipes an app);
//     a UDP forwarder owns its flows (one socket per client address,
//     bounded, ended when idle).
//
// # Machines are processes
//
// An image name maps in the config to a command line (with placeholders
// such as {exe}, the purrctl binary); each process gets Fly's environment
// (FLY_APP_NAME, FLY_MACHINE_ID, FLY_REGION, FLY_IMAGE_REF,
// FLY_PRIVATE_IP, ...) plus the app's env and secrets, binds its own
// loopback address (127.0.0.x) so that every machine uses the ports it
// would use on Fly, runs in its own process group and, on Linux, dies with
// the Sim. Its output is appended to a log file per machine in LogDir.
//
// # Platform
//
// Config.Platform (platform.go) says how unkind the emulated Fly is, one
// field per behaviour a deploy tool meets on Fly: lists and gets that lag
// a create (api.go), no version beside instance_id (machine.go), the
// on-failure restart default and the config defaults Fly fills in
// (restart.go, lifecycle.go), proxy routing on service checks and held
// requests (routing.go), rate limits with 429 (ratelimit.go), a new app's
// name that resolves late (dnsgate.go), replacing and failed states, app
// names another organisation holds and app-scoped tokens (api.go,
// api_apps.go). The zero Platform is kind; DefaultPlatform is Fly's.
// Config.MovePorts (ports.go) moves every port of a config written for
// port_base to another base, so that two Sims run side by side.
//
// # Faults
//
// A deploy tool must survive Fly's failures: Sim.InjectFault (or POST
// /flysim/v1/faults on the Machines API) makes matching calls fail, wait
// or lose their answer; Sim.InjectNetFault makes an app's DNS answers stale
// or a link slow, cut or partitioned, for a bounded time. A lease held by
// someone else, a process that exits and a crash (the signal call's
// SIGKILL) need no fault: they are real.
//
// flysim imports neither relay nor balancer: it runs them as processes.
package flysim
