// Package flysim is a local Fly.io: an emulated organisation whose apps run
// real processes, driven through the same Machines API, proxy and internal DNS
// a deploy tool and a multi-machine app meet on Fly. It exists so that
// purrfly's Fly-specific behaviour (Fly-Replay routing, .internal discovery,
// lease/update/wait deploys) is tested against something faithful, with the
// real fly-go flaps client, instead of hand-written mocks; and so a studio can
// rehearse a rollout on a laptop.
//
// # Shape
//
//	cfg, _ := flysim.LoadConfig("fly/sim.toml")
//	sim, _ := flysim.New(cfg, flysim.Options{LogDir: "sim-logs", Stdout: os.Stdout})
//	err := sim.Start(ctx) // binds API, DNS, proxies, UDP; starts machines; returns when they listen
//	st := sim.State()     // {"machines_api","token","dns","apps":{NAME:{"url","udp":{PORT:ADDR},"reserved"}}}
//	defer sim.Close()     // every process stopped per kill_signal/kill_timeout; nothing left
//
// One Sim owns: the Machines API server (api.go, api_machines.go, lease.go,
// api_apps.go, api_ips.go, api_secrets.go),
// one DNS server on UDP and TCP (dns.go), one proxy per app (proxy.go,
// routing.go, tunnel.go), one fault link per [[links]] entry (link.go),
// one UDP forwarder per UDP service of an app
// (udp.go, udp_flow.go, udp_route.go, udp_config.go), and per machine one
// run goroutine (lifecycle.go) that alone owns the machine's process
// (process.go) and its checks (checks.go). Every record (state, version,
// config, events, checks, lease; an app's created flag, secrets and IP
// assignments) is guarded by the one Sim.mu; nothing holds
// it across I/O or a process wait. API handlers change records under the
// lock and hand process work (start, stop, restart, destroy) to the run
// goroutine through a bounded queue; waiters sleep on a per-machine channel
// closed at every change, and on a per-app one (the UDP forwarders).
//
// # What matches Fly
//
//   - Machines are processes. An image name maps in the config to a command
//     line (Image.Command, with placeholders such as {exe}, the purrctl
//     binary); the machine config's init.cmd is appended, as fly.toml's
//     [processes] do. Each process gets Fly's env: FLY_APP_NAME,
//     FLY_MACHINE_ID (= FLY_ALLOC_ID, 14 hex characters), FLY_REGION,
//     FLY_IMAGE_REF, FLY_MACHINE_VERSION (new on every update),
//     FLY_PRIVATE_IP, FLY_PROCESS_GROUP, FLY_VM_MEMORY_MB, PRIMARY_REGION
//     (the config env's PRIMARY_REGION, where flyctl puts it, else the
//     app's primary_region), plus the app's and image's env and the app's
//     secrets. Layers, each overriding the ones before: the image's env,
//     the config's env, the secrets (so a secret wins over an env key of
//     the same name), Fly's variables. Each machine binds its own loopback
//     address (127.0.0.x, handed out from machine_ip_base and probed free), so
//     every machine of every app uses the ports it would use on Fly.
//   - Stop sends the config's stop_config signal (default: the app's
//     kill_signal, SIGINT) to the machine's process group and SIGKILLs after
//     kill_timeout (default 5 s, max 300 s). A stop request may override both.
//   - Apps (api_apps.go): get, list (?org_slug= of another organisation is a
//     404), create (flaps CreateApp, POST /v1/apps: 201 with the app; a name
//     that exists is a 422 "Validation failed: Name has already been taken",
//     another org_slug than Config.Org a 404). A created app starts with no
//     machines, IPs or secrets, as on Fly; until then its name is "app not
//     found" to every route, to DNS (_apps and every name under it) and to
//     Fly-Replay app=.
//   - IP assignments (api_ips.go; flaps GetIPAssignments, AssignIP,
//     DeleteIPAssignment): {"ips":[{ip,region,service_name,shared,
//     created_at}]}, one address of each kind per app (a second is a 422):
//     "v4" (dedicated) is the host of the app's proxy address, "shared_v4"
//     SharedIPv4, "v6" a stable per-app address in 2001:db8::/32,
//     "private_v6" (Flycast) one in fdaa::/16; region "global" unless
//     given. Fly carries UDP only on a dedicated IPv4: a UDP service of an
//     app without one drops every datagram (counted as no_dedicated_ipv4)
//     and lets them through as soon as one is assigned. An app the config
//     declares with machines starts with shared_v4 and v6, plus v4 when it
//     has UDP services, so its UDP flows from the start.
//   - Secrets (api_secrets.go; flaps ListAppSecrets, GetAppSecrets,
//     UpdateAppSecrets, SetAppSecret, DeleteAppSecret; [apps.secrets] in
//     the config): names [A-Z_][A-Z0-9_]* up to 256 characters, values up to
//     64 KiB without NUL, at most 500 an app; listed with a digest (the first
//     16 hex characters of the value's SHA-256) and values only with
//     ?show_secrets=true. Every change bumps the app's secrets version
//     (an update of several names is one change, validated whole). They are
//     read when a machine's process is spawned, never stored in its config:
//     a change reaches a machine on its next start, restart or update.
//   - Machines API (the subset flaps v0.8.0 calls, same paths and JSON, the
//     machine rendered with fly-go's own types): machines
//     list (?state= or flaps' bare ?started), get, create (Launch), update
//     (full config, new version and instance_id, the process replaced unless
//     skip_launch), destroy (refused while running unless kill/force), start,
//     stop, restart, signal (api_signal.go: {"signal":"SIGKILL"} or the
//     number, as flaps' Kill sends, to the process group; not a stop
//     request, so the exit is a crash for the restart policy), cordon,
//     uncordon, events, wait (state list, timeout
//     seconds, version or instance_id; 200 {"ok":true}, 408 on timeout),
//     leases (acquire with ?ttl=, refresh by acquiring with the current nonce
//     in fly-machine-lease-nonce as flaps' RefreshLease does, find, release;
//     409 while someone else holds it; start/stop/restart/update/destroy
//     refuse a missing or wrong nonce while a lease is held). A bearer token
//     is required ("Bearer" or "FlyV1" scheme). Errors are Fly's
//     {"error": "..."} with a fitting status.
//   - Restart policy (restart.go; the config's restart, set from the app's
//     restart_policy and restart_max_retries): a process that exits without
//     a stop request is started again under "always", and under
//     "on-failure" when it failed (non-zero exit or a signal) and fewer than
//     max_retries (default 10) restarts happened since the last requested
//     start; each automatic restart waits 100 ms, doubling up to 5 s. The
//     machine shows stopped (exit event), then starting, then started.
//   - Events (newest first): launch, start, exit (with exit_code, signal,
//     requested_stop), update, destroy, cordon/uncordon.
//   - Checks: the config's top-level checks and service checks (named
//     servicecheck-NN-<type>-<port>) are run by the Sim, HTTP or TCP, on
//     their interval, after their grace period, and reported in checks[] as
//     passing/critical with an output line. Every boot starts them critical.
//   - Proxy per app (HTTP and WebSocket): balances over started, uncordoned
//     machines whose checks all pass, preferring the proxy's edge region;
//     honours fly-force-instance-id, fly-prefer-instance-id,
//     fly-prefer-region and fly-force-region; sets Fly-Client-IP, Fly-Region
//     (the edge), X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Port and
//     Via; strips a client-sent Fly-Replay-Src. A Fly-Replay answer
//     (instance=, region=, app=, prefer_instance=, elsewhere=true, state=,
//     fallback=) makes the proxy send the original request (body up to 1 MB)
//     once more with Fly-Replay-Src: instance=<sender>;region=<r>;t=<unix
//     micros>[;state=<s>]; a second Fly-Replay is a 502 naming both machines.
//     A WebSocket upgrade is replayed before any machine upgrades it; the
//     machine that answers 101 gets both directions piped until either side
//     closes (at most 2048 at once per app).
//   - UDP per app ([[apps.udp]]: internal_port, port; fly.toml's [[services]]
//     protocol = "udp"): no balancing, as on Fly: one machine at a time
//     receives every datagram of the service, from every client. It is
//     picked among the machines that are routable as for the proxy and have
//     the service in their config (initialConfig adds it; a deploy that
//     copies the config keeps it), preferring the edge region, and kept
//     while it stays routable (sticky); when it stops, is cordoned or fails
//     its checks, another one takes over at once (the oldest qualifying one,
//     edge region first) with every flow, and the previous machine's
//     sessions break, as on Fly. There is no Fly-Replay for UDP.
//     A machine binds the service port on its own address (Fly's
//     fly-global-services; sim.toml passes it as UDP_HOST = "{ip}") and
//     answers from there: a datagram from any other address (a socket bound
//     to 0.0.0.0, another port) is dropped (counted), as Fly's answers
//     must leave from fly-global-services. Datagrams pass unchanged, up to
//     65,507 bytes; a machine that does not listen loses the datagram
//     (ICMP port unreachable), never the service.
//   - Internal DNS (.internal, TTL 5 s, from live state): vms.<app> and
//     all.vms.<app> TXT "<id> <region>,..." (long values split in 255-byte
//     strings), regions.<app> TXT, <id>.vm.<app>, <app>, <region>.<app>,
//     top<N>.nearest.of.<app> addresses, _apps and _instances TXT.
//
// # Faults
//
// A deploy tool must survive Fly's failures, so the Sim can be told to
// misbehave (fault.go): Sim.InjectFault, or POST /flysim/v1/faults on the
// Machines API from another process, arms a Fault that answers an error
// status, delays, or drops the response of a matching call (the change is
// made, the answer is lost) for a number of requests. A lease held by
// someone else, a process that exits (an image such as purrfly:broken) and a
// machine that stops answering need no fault: they are real, and so is a
// crash: the Machines API signal call SIGKILLs a machine's processes.
//
// The network between machines can misbehave too (netfault.go, link.go):
// Sim.InjectNetFault, or the same route with a "kind" field, arms a
// NetFault that ends by itself after duration_ms (at most 10 min):
//
//   - dns_stale: an app's .internal answers stay those of the moment of
//     injection (a lagging resolver or cache), whatever starts or stops;
//   - link_delay, link_drop, link_partition on a link: [[links]] name a TCP
//     path to an app's proxy, reached as {link:NAME} (http://address) in a
//     machine's env where {url:APP} would go; a delay holds every chunk,
//     a drop closes every open connection and refuses new ones, a
//     partition stalls open connections and holds new ones unanswered (a
//     black hole), then lets what waited through;
//   - heal ends a link's or an app's DNS fault at once.
//
// # What is simplified (and why)
//
//   - Addresses are IPv4 loopback, not 6PN IPv6. A records answer them;
//     AAAA questions get the IPv4-mapped form (::ffff:127.0.0.x), which Go
//     dials as IPv4, so code written for Fly's AAAA-only 6PN works unchanged.
//     The resolver is not at fdaa::3: machines get FLY_DNS_SERVER=host:port
//     (our convention; purrfly's DNS users honour it), plus HOST (their
//     address) and PORT (the app's internal_port) to bind. Names outside
//     .internal are REFUSED.
//   - A machine whose config has no restart policy behaves as policy "no":
//     a process that exits by itself leaves it stopped with an exit event
//     (Fly's default is on-failure; keeping "no" keeps an exiting image such
//     as purrfly:broken visible as stopped). "started" means the process was spawned, as on
//     Fly; Start additionally brings the configured apps up one by one, in
//     config order, each machine listening and its checks passing before the
//     next app starts (so a balancer listed first is there for its relays).
//   - An update always replaces the running process (Fly replaces the VM),
//     whatever changed; the region cannot change. init.exec is ignored, so
//     the API can only ever run command lines the config names.
//   - The proxy routes to a machine only when every check passes (Fly gates
//     on service checks and readiness checks). fly-force-instance-id reaches
//     a started machine even when cordoned or failing checks (how a deploy
//     tool verifies one machine). No autostart/autostop, no concurrency
//     limits, no TLS, no edge-region latency: the edge is the app's
//     edge_region (default its primary region).
//   - UDP: all apps share 127.0.0.1 as their public IP (as the proxies do,
//     on distinct ports), so a UDP service's public port (port) differs from
//     the port machines bind (internal_port), where Fly has them equal. The
//     public address is the host of the app's proxy address at port: one
//     public IP per app for HTTP and UDP, like a dedicated IPv4, and a test
//     that moves an app's proxy to another loopback address moves its UDP
//     with it. The public port is the Sim's business, as 80/443 are for the
//     proxy: the machine config says port = internal_port, Fly's rule.
//   - UDP goes through flows, not packet by packet: without raw sockets a
//     userspace forwarder can only tell whose answer is whose by giving each
//     client address a socket of its own (on 127.0.0.1), so machines see
//     that socket's address, not the client's (Fly preserves the client's
//     address). A flow lives while datagrams pass either way; it ends after
//     Options.UDPIdleTimeout without any (default 2 min, on Options.Clock;
//     Fly has no such timeout, a client that keeps pinging never notices),
//     and past Options.UDPMaxFlows flows (default 4096) a new client ends
//     the flow idle longest. A machine can only answer clients that sent to
//     the service first. Each flow holds a 64 KiB read buffer while it
//     lives.
//   - The first UDP pick waits until Start has brought the app up, so it is
//     the oldest routable machine of the edge region rather than whichever
//     passed its checks first (Fly does not say which machine it picks). The
//     UDP services of one app each pick their machine (Fly now routes UDP
//     per port); with the same configs they pick the same one.
//   - App creation: proxies and UDP ports are bound at Start, so the Sim
//     creates only the apps its config declares reserved (reserved = true:
//     name, proxy address, regions and UDP ports held, no machines, env,
//     cmd, checks, secrets or restart policy); CreateApp of any other name
//     is a 422 saying so. Config.Empty (purrctl sim --empty) makes every
//     app of a config reserved: an empty organisation. State and the table
//     list reserved apps (marked reserved until created, their addresses
//     already bound); their proxy answers 503 as for an app without
//     machines, their UDP services drop datagrams (no dedicated IPv4), and
//     Start has nothing to start for them. Apps cannot be deleted.
//   - IPs are labels except the dedicated IPv4 (the proxy's host, which
//     also gates UDP): HTTP reaches every app at its proxy URL whatever its
//     assignments, and apps whose proxies share a host (fly/sim.toml's
//     127.0.0.1) share that "dedicated" address.
//   - Secrets keep only their current version: ?version= newer than the
//     app's is a 404, an older one reads the current secrets. Values are
//     literal (no {placeholders}); Fly's own variables win over a secret of
//     the same name.
//   - Not emulated: rate limits, volumes, metadata, exec, suspend,
//     from_event_id in wait, lease descriptions, app deletion, secret keys
//     (the secretkeys routes).
//   - Processes run in their own process group and, on Linux, get SIGKILL if
//     the Sim dies (Pdeathsig), so none outlives a crashed Sim. They inherit
//     only a few variables of the Sim's environment (PATH, HOME, TMPDIR, ...):
//     a deployer's FLY_API_TOKEN never leaks into machines. Stdout and stderr
//     of every boot are appended to <LogDir>/<app>-<machine id>.log.
//   - flysim uses fly-go's machine types (not its flaps client) for the JSON
//     it serves, so what flaps decodes is exactly what was sent; it never
//     imports relay or balancer: it runs them as processes.
package flysim
