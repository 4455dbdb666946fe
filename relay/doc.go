// Package relay is purrfly's PurrLay replacement: the server PurrNet hosts
// and clients connect to, over WebSocket (WebGL builds) or UDP through
// LiteNetLib 2.x (desktop, mobile and Editor builds), to reach each other
// through a room. It speaks PurrNet's relay protocol byte for byte
// (docs/PROTOCOL.md, docs/UDP.md; the codecs are package wire) and keeps
// itself registered with the balancer through wire's internal protocol.
// Its public API is Server (New, Start, Shutdown, Close, Retire and its
// end, its addresses, Stats, ConsistencyCheck), Options, Router and the
// defaults.
//
// # Shape
//
// The server wires packages that each own one part, and keeps the parts
// that are about the relay as a whole:
//
//	relay                   options, life cycle, HTTP routes; the registrar; retirement; the mesh of a multi-machine app
//	internal/core           connections, queues, rooms and their phases, routing, host migration, forwarding as a role
//	internal/core/phase     a room's phase: the named transitions, each refusing the phases it may not start from
//	internal/wstransport    WebSocket: the upgrade, a reader and a writer per connection, close codes, links to holders
//	internal/wsframe        RFC 6455 frames on the upgraded socket: a Reader, a Writer with one owner at a time
//	internal/udptransport   UDP: LiteNetLib peers (package litenet; 2.x, and 1.x on its own port) as connections, NAT introduction
//	internal/udpframe       PurrNet's UDP framing, read where it enters (UDP peers, links carrying one)
//	internal/buf            pooled message buffers with headroom, one owner at a time
//
// The core imports neither coder/websocket nor litenet (go list -deps
// says so): a transport hands it a connection, a message and the
// message's delivery method, and drains what the core queues for the
// connection. Neither transport imports the other.
//
// Routes (http.go): /ping; /ready (ready.go); /metrics (open on the
// private network, the operator's secret through Fly's proxy); the
// internal routes the balancer or another machine calls with the shared
// secret: allocation (handleAllocate), room listing and closing
// (rooms_http.go, rooms_close.go), the four host migration calls
// (migration_http.go), a handover (handover_give.go), a forwarded link
// (forward.go) and retirement (retire.go); and the WebSocket upgrade at
// /. Every SECRET check (/metrics' too) is secretGuard's, which throttles
// wrong ones per source (limit.AuthThrottle). The dedicated WebSocket
// port upgrades on any path (ws.go). Every error is wire's JSON error.
//
// # Ownership
//
//   - Server: options and listeners are static after Start (which
//     completes the advertised addresses first); mu guards the life-cycle
//     flags. Goroutines: a Serve loop per listener, the cleanup tick, the
//     registrar, the reachability probe and the retire loop (bg); each
//     connection's own (sessions: a WebSocket connection or a UDP peer,
//     admitted by admitSession; a UDP peer's routed first message; a link
//     toward a holder). Shutdown and Close wait for both, and close the
//     accepted TCP sockets outright (rawConns) if a close handshake hangs.
//   - registrar: its dirty set and unregister outbox are guarded by
//     registrar.mu; everything that talks to the balancer runs on its one
//     goroutine (run), and readers only mark rooms dirty or queue removals;
//     readiness is what its heartbeats last learnt, under its own lock. The
//     boot watch runs on a goroutine of run's, which waits for it; the boot
//     it knows is under bootWatch.mu. The reachability probe's result is
//     an atomic flag, set once.
//   - retirement: the latest stop and how the retirement ended are under
//     retirement.mu, taken under Server.mu by a retire call; the retire
//     loop is one goroutine, started by the first call.
//   - mesh: static after New but self (set by Start before anything is
//     served); the locator's cache and the rooms handed over lately are
//     under locks of their own, never held across the network.
//
// Every mutex of the relay, its packages and litenet is in one lock order,
// written as a table (mutex, rank, what it guards) in the doc of package
// internal/lockrank, whose checker every relay test binary runs.
//
// # Rooms and registration
//
// A room is created by the balancer's allocation call
// (wire.PathRelayAllocate; the core's Allocate has the rules: replays,
// takeovers of a vacant room, draining, capacity). Its life is its phase
// machine; its count (host included, as PurrLay counts it) bumps its
// revision on every change; an empty room expires EmptyRoomTimeout after it
// became empty, and one whose host never came HostConnectTimeout after its
// allocation, on the cleanup tick of the injected clock.
//
// With a BalancerURL, the registrar sends a heartbeat (wire.PathRegister)
// at start and on every HeartbeatInterval tick (sooner, with a doubling
// delay, after a failure), then publishes the whole room snapshot
// (wire.PathPublish, Snapshot=true) in chunks of at most 500 rooms, then
// flushes the unregister outbox (wire.PathUnregister). Between heartbeats,
// count changes are coalesced in the dirty set and published by the
// registrar at once. A publication the balancer rejects (it does not know
// this boot) makes the relay register and republish; one it refuses
// (conflict, fenced) ends that incarnation here, so that a name is live on
// one machine only. A removed room stays in the outbox, keyed by (name,
// epoch, revision), until an answer settles it. Every request carries the
// secret and the internal protocol version and is bounded by
// RequestTimeout. Readiness (wire.PathReady) is ready from the first
// accepted heartbeat while the balancer would still list the boot, else
// 503 with the reason. The boot watch (bootwatch.go) long-polls
// wire.PathBalancerBoot and asks for a heartbeat at once when a new
// balancer boot answers. With Options.ReachableURL (reachable.go) the
// heartbeats say players cannot reach the relay, so it gets no room, until
// a probe of that URL preferring this machine is answered by this boot.
//
// # Retiring
//
// A deploy that replaced the machine retires it (wire.PathRelayRetire,
// retire.go, which has the rules): no new room (wire.ErrRetiring; a vacant
// room of the name is let go), no handover asked, a public upgrade not for
// one of its rooms sent elsewhere with Fly-Replay (multi-machine), its
// games served to their end; heartbeats and /ping say so. Empty rooms are
// released once their players' recovery window is over; when
// nothing is left the relay refuses new sessions and closes Retired(), and
// at RetireBy it first closes what is left with 1012.
//
// # Routing and multi-machine apps
//
// Options.Router is consulted before every WebSocket upgrade (session from
// ?s=) and before an allocation (the room name); when it does not serve
// here the relay answers 421 with "Fly-Replay: instance=<id>" and does not
// upgrade or allocate. An allocation whose wire.HeaderTargetBoot names this
// boot skips it: the balancer chose this machine and called it directly.
//
// With Options.MultiMachine, each machine of a relay app registers on its
// own, under its own Endpoint (its private address), and advertises the
// app's public host, port and PublicEndpoint. A room stays on the machine
// that holds it; every request or connection for it is brought there. A
// machine learns where a room lives from the balancer
// (wire.PathRoomLocation, locate.go), through a cache of LocateTTL with
// concurrent lookups of one room shared. The sticky router (mesh.route)
// answers a hinted upgrade for a room of another machine of the app with a
// Fly-Replay to it, and serves a request replayed already. A connection
// without a hint is placed after its first message: if it names a room
// another machine of the app holds and nobody is in, this machine first
// asks the holder to hand the room over (wire.PathHandover, handover.go,
// handover_give.go). The holder agrees only for the room's host
// credential while the room still awaits its first host: it ends its
// incarnation, and this machine adopts the room and publishes it with
// wire.Publication.MovedFrom. Any other connection is forwarded over a
// link to the holder (wire.PathForward, forward.go), where it is an
// ordinary connection. A UDP
// peer's link carries PurrNet's UDP framing (wire.HeaderLinkFraming). A
// connection the balancer cannot place, or whose holder cannot be reached,
// is answered here ([4] for an unknown room). A stopped machine drains; a
// killed one is dropped by the balancer with its routes, and the links to
// it end, closing the peers forwarded over them.
//
// # Shutdown
//
// Shutdown stops new rooms, sends a draining heartbeat, waits for the
// connections to go (DrainTimeout, on the injected clock, or ctx), closes
// the rest with 1012, releases the remaining rooms at the balancer and
// stops everything. Close does the same at once, without the drain or the
// final balancer calls.
package relay
