// Package relay is purrfly's PurrLay replacement: the server PurrNet hosts
// and clients connect to, over WebSocket (WebGL builds) or UDP through
// LiteNetLib 2.x (desktop, mobile and Editor builds), to reach each other
// through a room. It speaks PurrNet's relay protocol byte for byte
// (docs/PROTOCOL.md section 2, docs/UDP.md; codecs in package wire) and
// keeps itself registered with the balancer through wire's internal
// protocol.
//
// # Shape
//
//	transports                     routing core (core.go, conn.go, rooms.go)      registrar (registrar.go)
//	  ws.go: reader goroutine  --(conn, *buf)-->  core.handle: auth / route  --enqueue-->  conn queue
//	  udp.go: socket reader    --(conn, *buf)-->                                      |
//	  writers drain the queue  <--takeBatch / transport.wake------------------------ conn queue
//	                                       room changes --roomChanged/roomRemoved--> dirty set, outbox
//
// The routing core knows connections (conn) and rooms, never a transport:
// a conn has a small transport interface (wake: frames were queued;
// closed: end, gracefully or not) and a framing (PurrNet's WebSocket
// framing, or its UDP framing whose packets carry LiteNetLib delivery
// methods, wire/udp.go). Close reasons are the core's own vocabulary; each
// transport tells them its own way (ws.go maps them to close codes,
// udp_conn.go to LiteNetLib's Disconnect after a drain or at once). A
// transport creates a conn with core.newConn (which hands out the
// process-wide connection id, shared by every transport), gives every
// received message to core.handle from one reader at a time, drains the
// conn's queue from its writer and calls core.leave once at the end.
//
//   - WebSocket (ws.go; coder/websocket, on the dedicated port and as an
//     upgrade at / on the HTTP port): one reader and one writer goroutine
//     per connection.
//   - UDP (udp.go, udp_conn.go; package litenet): no goroutine per peer. A
//     socket reader reads batches of datagrams for every peer (recvmmsg)
//     and delivers each peer's messages in order; the conn's queue is
//     pulled into LiteNetLib packets by whoever flushes the socket (the
//     reader right after its batch, else litenet's flusher), many peers
//     per sendmmsg. A frame goes out with its delivery method (the client's
//     or host's; ReliableOrdered for the relay's own packets).
//   - A forwarded connection (forward.go) is a role of the core
//     (roleForwarded): its frames go to the link toward the holder
//     machine, whatever the transport the peer came over.
//
// # The forwarding path
//
// A reader reads each message into a pooled buffer (buf.go; size classes,
// starting small) with five bytes of headroom in front. A client packet
// becomes [2][sender][payload] by writing the header into that headroom; a
// host SEND_ONE is delivered by moving the frame start past its header; a
// pipe packet gets its id rewritten in place. The same buffer then goes to
// the receiver's queue: no copy, no allocation (BenchmarkForward*, and
// TestForwardingAllocatesNothing asserts zero allocations per packet).
//
// Nothing the relay sends is longer than 65,535 bytes: PurrNet's host
// socket (SimpleWebTransport) ends the connection, and so the room, on a
// longer message (over UDP the same bound applies, as a room may mix
// transports). A client payload of up to 65,535 bytes is legal, but one
// over 65,530 would make a longer [2][sender:4][payload] frame, so it is
// dropped and counted (too_large_for_host; PurrLay's SendOne drops it too)
// and the client stays connected. SEND_ONE and pipe frames only shrink or
// keep their length, and a host's "clients connected" list is bounded by
// the room's client limit.
//
// There is no global lock on this path. The sender's reader takes its
// room's small mutex to look up the peer (the host, or the target client in
// the room's map) and enqueue; enqueueing takes the receiver's queue mutex
// for an append and never blocks or does I/O. Holding the room lock across
// the enqueue orders every frame against joins, leaves and kicks: a host
// never gets data from a client after that client's disconnect notice.
// Pipe routing looks the target up in a sharded table.
//
// Each connection has a bounded queue. PurrNet treats its WebSocket as a
// reliable, ordered stream, so a live receiver never loses a frame (unlike
// derp, which carries datagrams and may drop): the queue absorbs bursts up
// to a hard bound (4096 frames or 8 MiB of pinned buffers: a queued frame
// counts its pooled buffer's capacity, not its length, since that is the
// memory it holds). Once the backlog passes the soft
// bound (512 frames or 1 MiB) the slow-receiver clock runs; a receiver
// still above it after the deadline (Options.SlowReceiverTimeout, 2 s) is
// disconnected (slow_receiver), and one that reaches the hard bound is
// disconnected at once
// (queue_overflow). Every other connection keeps flowing: no sender ever
// waits for a receiver. The writer takes up to 64 frames at a time and
// writes them with one system call per 32 KiB (frameconn.go).
// coder/websocket upgrades, but it flushes every message, so an accepted
// connection's data frames are encoded by the relay itself (unmasked
// server frames) into one pooled buffer per batch, on the same hijacked
// socket, under one mutex with the control frames; and after the upgrade
// the relay reads the peer's frames itself too (wsread.go: binary
// messages, fragments, pings answered, the close handshake), see below. That cut the relay's CPU
// per message by about 40% under fan-in and 20 to 30% under fan-out at
// 1,000 connections (BENCHMARKS.md); at low rates batches are single
// frames and nothing changes. A link to a holder machine writes the same
// way through its socket, a masked frameConn (linkconn.go): client frames,
// one system call per batch, which cut the edge's CPU per forwarded
// message by 20 to 35%; the edge also closes a link's socket itself when
// its close handshake outlives linkGrace. Buffers are held only while queued or
// being written, never by an idle connection.
//
// # Who writes a frame (issue 16)
//
// Queueing costs a hand-off: the receiver's writer is woken, writes, and
// parks again. Under load that buys batching (one system call for many
// frames) and a second core (the writers write while the reader reads
// on). At game rates it buys nothing: most games are many connections each
// at a modest tick rate, every frame finds its receiver idle, and the
// hand-off is one goroutine wake-up per message that an echo server,
// which writes on the goroutine that read, never pays. So a reader writes
// the frame it routes itself (conn.send, claim.write) when all of these
// hold, and queues it otherwise:
//
//   - its own input has nothing more waiting (frameReader.more, after
//     each message): a reader with more to read is under load, and the
//     hand-off lets it read on while other cores write;
//   - the receiver's writer is idle with nothing queued (conn.wr), so no
//     frame can be overtaken and there is nothing to batch with;
//   - frames to the receiver are not coming in bursts (conn.batching): its
//     writer's last batch was a single frame, and no frame arrived during
//     its last direct write. One batch of one frame turns direct writes
//     back on.
//
// The claim is made under the receiver's conn.mu inside the room lock,
// which fixes the frame's place in the receiver's order; the write happens
// after the room lock is released, with one non-blocking write system
// call on the socket's descriptor (frameConn.writeDirect). It never waits:
// if the connection's reader holds the frame mutex (a pong to a full
// socket), or the socket takes nothing, the frame goes back to the front of the queue
// for the writer; if the socket takes part of it, the rest and the frame
// mutex pass to the writer, which finishes the frame before anything else
// (the reader's control frames included) goes out. Meanwhile frames
// routed to the receiver queue behind the claim, and the writer, closing
// or not, waits for it to end. A throwaway prototype that wrote every
// frame directly lost 15% at saturation (every frame its own system call,
// a fan-out host's reader writing every client's frame itself);
// BENCHMARKS.md has what this rule costs and saves, measured both ways.
// A link's frames (toward a holder machine) follow the same rule; a UDP
// peer's reader never writes a WebSocket frame itself (it serves every
// peer of its socket), nor does a link's reader.
//
// With the hand-off gone the relay made the echo's system calls and
// wake-ups per message (perf stat), and what was left above the echo was
// coder/websocket's read path, which the echo pays too: a channel-based
// read lock taken twice a message, its message reader's reset and a
// deferred check per frame header, about 1.2 to 1.9 µs of the relay's 14
// µs a message at the game rate. So the relay reads an accepted
// connection's frames itself after the upgrade (frameReader, wsread.go),
// as it already wrote them; FuzzFrameReader holds it to what
// coder/websocket read. BENCHMARKS.md (issue 16) has what each of the
// two changed.
//
// An idle WebSocket connection costs about 18 KiB (BENCHMARKS.md; the
// target was 30); an idle UDP peer much less (no goroutine, no socket of
// its own: its LiteNetLib state, its conn and its queue). The HTTP handler upgrades, reads and routes the authentication (the
// deepest work a reader does: JSON, perhaps a handover or a link dial) and
// then hands reading to a fresh goroutine and returns, so the long-lived
// reader keeps a small stack and net/http's request state is garbage.
// coder/websocket keeps the bufio pair it is handed at the hijack for the
// connection's life, so it gets 256-byte ones (readconn.go) instead of
// net/http's 4 KiB pair: after the upgrade the relay's own frame reader
// reads through the small reader, which sits on readConn, which reads the
// socket into a pooled 4 KiB buffer taken only when the socket is
// readable and returned once consumed.
//
// An abrupt close (peer gone, slow receiver, overflow, write error) drops
// the socket at once. A graceful one (kicked, host left, auth failed,
// shutdown) flushes what is queued and sends a close frame, which needs a
// peer that reads: a writer blocked on one whose TCP window is full would
// never return, and its connection, goroutines, socket and queue would
// stay forever. So a graceful close arms a grace (closeGrace, 5 s) after
// which the socket is dropped, failing the blocked write and the parked
// read; the writer disarms it when it ends.
//
// Every dropped packet is counted by reason in
// purrfly_relay_dropped_packets_total and every ended connection by
// reason in purrfly_relay_disconnects_total.
//
// # Ownership
//
//   - Server: options and listeners are static after Start; mu guards the
//     life-cycle flags. Goroutines: one Serve loop per listener, the
//     empty-room cleanup tick, the registrar, plus two per connection;
//     Shutdown and Close wait for all of them, and close the TCP sockets
//     outright if a close handshake hangs.
//   - conn: id, transport, framing and dw (its direct write) are static;
//     role, room, up (the link of a forwarded conn) and nat are written
//     once by the conn's reader at authentication (under room.mu); direct
//     is the reader's own; the queue, the close reason, the write side's
//     owner (wr) and batching are guarded by conn.mu. Only the reader calls
//     handle and leave; only the transport's writer drains the queue, and
//     only the owner of the write side writes data frames.
//   - frameConn: its mutex is the frame mutex, held for whole frames by
//     whoever writes to the socket (the writer, the reader's control
//     frames, coder/websocket on a link, a sender's direct write); a
//     direct write that leaves part of a frame hands it, locked, to the
//     writer with the rest.
//   - frameReader: its mu is held by whoever reads an accepted
//     connection's frames (the reader; the writer's close handshake once
//     the reader is done), and guards its state.
//   - wsTransport: channels static, the close grace guarded by its mu.
//   - udpConn: the peer and conn static; the routed-authentication state
//     (authing, early, left) guarded by its mu; litenet serialises a peer's
//     deliveries, which makes the socket reader (or, while a first message
//     is being routed to another machine, that goroutine) the conn's reader.
//   - room: everything but the name is guarded by room.mu, which is never
//     held across I/O.
//   - roomTable/connTable: one generic sharded map (shardMap), each shard
//     under its own lock.
//   - registrar: dirty set and outbox guarded by registrar.mu; everything
//     that talks to the balancer runs on the registrar goroutine but the
//     boot watch (its own goroutine, which the registrar's waits for; the
//     boot it knows under bootWatch.mu) and the reachability probe (one
//     goroutine until it succeeds; an atomic flag).
//   - retirement: RetireBy and how it ended guarded by retirement.mu, a
//     leaf lock (Server.mu -> retirement.mu); the retire loop is one
//     goroutine, started by the first retire call.
//
// Lock order: room table shard -> room.mu -> conn.mu, and room.mu ->
// registrar.mu. Nothing takes them the other way round.
//
// # Rooms
//
// A room is created by the balancer's internal allocation call
// (wire.PathRelayAllocate): a new random opaque epoch, revision 1, fresh
// host and client secrets. The same allocation_id for the same live room
// replays it (same secrets, same epoch, the room's current revision); a
// different id, or none, for a live or still reserved room is
// room_name_taken. A draining relay still replays (the answer may have
// been lost) but creates nothing: a new room is draining. A full relay
// also replays but creates nothing: at MaxRooms rooms (or the lower
// Capacity.MaxRooms, RELAY_MAX_ROOMS) or Capacity.MaxConnections
// connections (RELAY_MAX_CONNECTIONS) a new room is relay_full (503), and
// the balancer tries another relay. Capacity never refuses a connection
// to a room the relay holds: its players must be able to join it. The
// relay's Labels and Capacity travel in every heartbeat's wire.RelayInfo
// for the balancer's placement.
//
// A room's life is one phase (phase.go: awaiting its host, hosted,
// vacant, and host migration's pending and expired, then removed),
// changed only by the named transitions there. A room whose host has
// connected and left is vacant; at generation 0 it is published with
// wire.Publication.Vacant. PurrNet reuses one room name per scene with a
// fresh allocation_id on every Play, so such a room with no connection at
// all is taken over by an allocation with another id: the old incarnation
// is removed (its epoch goes to the unregister outbox) and a new one is
// created with a new epoch, a new incarnation and fresh credentials, so
// the old ones no longer authenticate. A room whose host has not connected
// yet stays reserved for its allocation, a vacant room a client is still
// (or again) connected to is room_name_taken, and so is a room in the
// middle of a host migration (a claim's lease, or after one) until a host
// connects or it empties out for EmptyRoomTimeout.
//
// # Host migration
//
// migration.go has the design: the incarnation, generation, credentials
// (the client credential for the incarnation, the host credential
// single-activation and rotated by every claim), fencing token, grant,
// lease and the provisional host's lane, all under the room's lock and
// checked against the injected clock. The four calls arrive from the
// balancer on internal routes (migration_http.go) with its snapshot of
// the room's route (boot, epoch, revision), which is checked first.
//
// The room's count (host included, as PurrLay counts it) changes bump the
// revision and are
// published promptly. The host leaving disconnects every client (close
// code 1000, no in-band message); a room that had clients stays with count
// 0 (vacant) for host migration, and so does a room whose provisional
// host left; an active host leaving an otherwise empty room ends it. Empty
// rooms expire EmptyRoomTimeout after they became empty, checked on a
// cleanup tick of the injected clock; republishing never resets that.
//
// Deviations from PurrLay, on purpose: a host that logs in after clients
// receives [3] first and then one [0][ids...] packet (PurrLay sends the ids
// before [3]; PurrNet's host accepts either order, and a reply-first order
// is what a client reading the auth reply expects); a SEND_ONE with an
// empty payload is dropped (PurrLay logs and drops it in its transport);
// malformed host packets are dropped and counted instead of throwing.
//
// # Registration
//
// With a BalancerURL, the registrar goroutine sends a heartbeat
// (wire.PathRegister) at start and on every HeartbeatInterval tick, then
// publishes the whole room snapshot (wire.PathPublish, Snapshot=true), then
// flushes the unregister outbox (wire.PathUnregister). Between heartbeats,
// count changes are coalesced in a dirty set and published at once by the
// registrar (never by a reader). A publication the balancer rejects (it
// restarted and does not know this boot) makes the relay register and
// republish at once. A removed room enters the outbox keyed by (name,
// epoch, revision) and leaves it only on a confirming answer; failed sends
// are retried on every heartbeat. A lost answer is retried with the same
// epoch and revision. Every request carries the secret and the internal
// protocol version and is bounded by RequestTimeout. What the heartbeats
// last learnt is the relay's readiness (ready.go, wire.PathReady): ready
// from the first accepted heartbeat while the balancer would still list
// the boot, else 503 with the reason (a refused SECRET, an unreachable
// balancer).
//
// The registrar also watches the balancer's boot (bootwatch.go: a long
// poll of wire.PathBalancerBoot, polled again within a second while it
// fails) and registers at once when a new boot answers, so a restarted or
// redeployed balancer has its relays back within about a second, not a
// heartbeat later. A relay with Options.ReachableURL (the app's public URL
// on Fly; reachable.go) says in its heartbeats that players cannot reach it
// until the proxy routes a probe preferring its machine to it: the
// balancer lists it starting and places no room there meanwhile.
//
// # Retiring (retire.go)
//
// A deploy that replaced this machine retires it (wire.PathRelayRetire):
// no new room (wire.ErrRetiring; a vacant room of the name is let go), no
// handover asked, public upgrades not for one of its rooms sent to another
// machine of the app (Fly-Replay elsewhere), its games served to their end
// (UDP included: a retiring machine that receives the app's UDP forwards
// it until its players have left). Every heartbeat and /ping say so. Empty
// rooms are released once their players' recovery window is over; when
// nothing is left the relay refuses new sessions and Retired() is closed
// (purrctl relay then exits 0), and at RetireBy it closes what is left with
// 1012 first.
//
// # Routing, shutdown
//
// Options.Router is consulted before every WebSocket upgrade (session from
// ?s=) and before allocation (the room name). When it does not serve here
// the relay answers 421 Misdirected Request with "Fly-Replay:
// instance=<id>" and a JSON error, and does not upgrade or allocate. An
// allocation whose wire.HeaderTargetBoot names this boot skips the Router:
// the balancer chose this machine and called it directly.
//
// # Multi-machine apps (Options.MultiMachine; mesh.go, locate.go, handover.go, forward.go)
//
// A relay app may run several machines. A room lives in one machine's
// memory, so the rule is simple: a room stays on the machine that holds it
// (sticky ownership), and every request or connection for it is brought
// to that machine. Hashing only guesses; the balancer knows.
//
// Registration and placement. Each machine registers on its own (its own
// boot, machine id and region) under its own Endpoint, an address the
// balancer reaches directly (on Fly its 6PN address, http://[FLY_PRIVATE_IP]:PORT;
// 127.0.0.x under flysim), and advertises the app's public host, port and
// PublicEndpoint (/servers lists the app once per region under it). The
// balancer treats the machines as separate relays: it picks one (region,
// then its placement strategy) and calls it directly, naming the chosen boot in
// wire.HeaderTargetBoot, so the room is created there and the balancer's
// record of the room points at that machine. We chose this over letting
// the app hash the room to its owner with Fly-Replay: the balancer already
// proves which boot answered an allocation (an answer from another boot is
// indeterminate), a direct call saves the proxy hop, placement can follow
// load (a new machine fills up at once instead of taking 1/N of new
// rooms), and with sticky ownership the hash owner would stop meaning
// anything as soon as the machine set changes.
//
// How a machine learns where a room lives. It holds its own rooms in its
// table; for any other room it asks the balancer
// (wire.PathRoomLocation: holder boot, machine id, endpoint, public host
// and port), through a small cache (LocateTTL, 1 s; "no such room" for at
// most 250 ms) with concurrent lookups of one room shared. The balancer
// answers only for routes of current registrations, so a stopped or failed
// machine's rooms are "not found" as soon as the balancer drops it.
//
// Hinted requests (the Go client's ?s=) are routed before the upgrade by
// mesh.route: a local room or no hint is served here; a request that was
// replayed already (Fly-Replay-Src) is served here and forwarded after
// its authentication (one replay hop, never a loop); a room the balancer
// places on another machine of this app (same public host and port, a
// machine id) is answered "Fly-Replay: instance=<holder>"; a room the
// balancer does not know, or a balancer that cannot be asked, falls back
// to Options.Router (rendezvous hashing on Fly), else is served here.
//
// The room follows its host (handover.go). Hintless connections
// (PurrNet's own client: ws://host:port, empty path) land on any machine.
// A host forwarded from there would tie its game to two machines, so when
// a first message names a room another machine of the app holds, the edge
// first asks the holder to hand it over (wire.PathHandover). The holder
// agrees only for the room's host secret while nobody is connected (the
// host arriving, or coming back to a vacant room): it ends its incarnation
// and answers the credentials; the edge creates a new incarnation with
// them and publishes it with wire.Publication.MovedFrom, which the
// balancer applies over exactly the old incarnation (and tombstones it).
// The host is then served directly. This is the one way a room moves, and
// only while nobody is in it; membership changes never move rooms.
//
// Hintless clients can only be placed after their first message. The
// reader parses the authentication message; if it names a room that is
// not local and the balancer places on another machine (and the holder
// declined the handover), the edge opens a link to the holder: a
// WebSocket to the holder's Endpoint at wire.PathForward, with
// the shared secret and wire.HeaderForwardedBy (so the holder never
// routes or forwards it again), bounded by ForwardTimeout, with TCP
// keepalive (about 11 s to notice a holder that vanished without closing
// its sockets). The authentication message is replayed on the link and
// from then on frames are piped both ways DERP-mesh style, never inline on
// a reader: the client's reader queues each frame on the link's queue
// (drained by the link's writer), and the link's reader queues the
// holder's frames on the client's queue (drained by the client's writer).
// Both are ordinary conn queues with their bounds and slow-receiver rules,
// and frames are moved, not copied. The holder serves the link as an
// ordinary connection, so a forwarded peer sees the holder's own frames,
// ids and notices, and the same limits apply (the edge reads the client
// with the same size limit, text-frame rule and close reasons as a direct
// reader). A close frame from the holder is passed on with its code and
// text after the frames queued before it ([4] then 1008, 1000 kicked or
// host left, 1012 when the holder drains); a link that drops without one
// (the holder died) drops the client at once, exactly as a direct
// connection to a dead machine drops. A client that leaves closes its link
// with 1000, so the holder sees it leave. When the edge itself shuts down
// it closes its forwarded clients with 1012 like its direct ones. A
// connection the balancer cannot place, or whose holder cannot be
// reached, is answered by the local core, i.e. [4] for an unknown room.
//
// Failure handling. A stopped machine drains (draining heartbeat, 1012,
// unregistered rooms); a killed one stops answering the balancer's health
// probe and is removed with every route it held. Either way its rooms are
// reported gone (/join: room_not_found) rather than half-alive, and the
// links to it end, closing the forwarded clients. A stopped edge closes
// the clients it forwarded (1012 when it drains, dropped when killed):
// their rooms, held elsewhere, lose those players and carry on. A host is
// still forwarded in the cases handover.go lists (clients were in first,
// a draining edge, a balancer or holder that predates handovers, a holder
// that cannot be asked); only then does a room depend on a second
// machine. Machines that
// join register and take new rooms; rooms do not move when the machine
// set changes.
//
// A UDP peer lands where Fly sends the app's UDP (one machine at a time):
// its first message is routed on a goroutine of its own (the socket
// reader never waits on the network), and a link carrying it says so
// (wire.HeaderLinkFraming): the holder reads PurrNet's UDP framing from it
// and prefixes every frame it sends back with the frame's delivery method,
// which the edge strips and sends the frame to the peer with.
//
// Cost: a forwarded connection is one more hop and two more goroutines
// (the link's reader and writer) on the edge. purrfly_relay_mesh_* count
// lookups, route decisions, forwards by outcome, link dial time and the
// forwarded connections open; purrfly_relay_forwarded_*{dir="mesh_out",
// dir="mesh_in"} count the frames and bytes carried.
//
// Shutdown stops new rooms, sends a draining heartbeat, waits for the
// connections to go (DrainTimeout, on the injected clock, or ctx), closes
// the rest with 1012, releases the remaining rooms at the balancer and
// stops everything. Close does the same at once, without the drain or the
// final balancer calls.
package relay
