// Package relay is purrfly's PurrLay replacement: the server PurrNet hosts
// and clients connect to, over WebSocket, to reach each other through a
// room. It speaks PurrNet's relay protocol byte for byte
// (shared/PROTOCOL.md section 2, codecs in package wire) and keeps itself
// registered with the balancer through wire's internal protocol.
//
// # Shape
//
//	transports (ws.go)          routing core (core.go, conn.go, rooms.go)      registrar (registrar.go)
//	  reader goroutine  --(conn, *buf)-->  core.handle: auth / route  --enqueue-->  conn queue
//	  writer goroutine  <--takeBatch------------------------------------------  conn queue
//	                                       room changes --roomChanged/roomRemoved--> dirty set, outbox
//
// The routing core knows connections (conn) and rooms, never a transport.
// A transport creates a conn with core.newConn (which hands out the
// process-wide connection id), gives every received message to core.handle
// from one reader goroutine, drains the conn's queue from one writer
// goroutine, and calls core.leave once at the end. WebSocket is the only
// transport today (coder/websocket, on the dedicated port and as an
// upgrade at / on the HTTP port); UDP can be added beside it without
// touching the core.
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
// to a hard bound (4096 frames or 8 MiB). Once the backlog passes the soft
// bound (512 frames or 1 MiB) the slow-receiver clock runs; a receiver
// still above it after the deadline (2 s) is disconnected (slow_receiver),
// and one that reaches the hard bound is disconnected at once
// (queue_overflow). Every other connection keeps flowing: no sender ever
// waits for a receiver. The writer takes up to 64 frames at a time and
// writes them one by one; coder/websocket flushes every message, so one
// system call per frame is the current cost (frame-level writes are issue
// 7's measurement to make). Buffers are held only while queued or being
// written, never by an idle connection.
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
//   - conn: id, channels and the abort hook are static; role and room are
//     written once by the conn's reader at authentication (under room.mu);
//     the queue and close reason are guarded by conn.mu. Only the reader
//     calls handle and leave; only the writer calls the transport's Write
//     and Close.
//   - room: everything but the name is guarded by room.mu, which is never
//     held across I/O.
//   - roomTable/connTable: sharded maps, each shard under its own mutex.
//   - registrar: dirty set and outbox guarded by registrar.mu; everything
//     that talks to the balancer runs on the registrar goroutine.
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
// room_name_taken; a draining relay answers draining. The room's count
// (host included, as PurrLay counts it) changes bump the revision and are
// published promptly. The host leaving disconnects every client (close
// code 1000, no in-band message); a room that had clients stays with count
// 0 for host migration, an otherwise empty room is removed at once. Empty
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
// protocol version and is bounded by RequestTimeout.
//
// # Routing, shutdown
//
// Options.Router is consulted before every WebSocket upgrade (session from
// ?s=) and before allocation (the room name). When it does not serve here
// the relay answers 421 Misdirected Request with "Fly-Replay:
// instance=<id>" and a JSON error, and does not upgrade or allocate.
//
// Shutdown stops new rooms, sends a draining heartbeat, waits for the
// connections to go (DrainTimeout, on the injected clock, or ctx), closes
// the rest with 1012, releases the remaining rooms at the balancer and
// stops everything. Close does the same at once, without the drain or the
// final balancer calls.
package relay
