// Package core is the relay's routing core: connections and their queues,
// rooms and their phases, routing, host migration, allocation, and
// forwarding a connection to the machine holding its room. It knows no
// transport: a transport hands it a connection, a message in PurrNet's
// WebSocket form and the message's delivery method (buf.Buf.Method), and
// drains what the core queues for the connection. It imports package wire,
// the buffers and the phase machine, and neither coder/websocket nor
// litenet.
//
// # Shape
//
//	transport reader --(Conn, *buf.Buf)--> Core.Handle: authenticate (auth.go) or route (route.go)
//	                                         |-- Conn.Offer: queue (queue.go), or claim the receiver's socket
//	transport writer <--Conn.TakeWrite-------'   for a frame the reader writes itself (Claim.Write)
//	room changes --Notifier--> the registrar (a dirty set, the outbox)
//
// A transport creates a connection with NewConn (or MakeConn, then
// Publish, when its callbacks need the connection first), which hands out
// the process-wide connection id; gives every received message to Handle
// from one reader at a time; drains the queue from its writer, after a
// Wake; and calls Leave once, from the reader, when the connection ends.
// Its Transport's Wake and Closed never block: they run under room locks.
// A connection's close reason is the core's own vocabulary (Reason); each
// transport tells it its own way (a close code, a LiteNetLib disconnect),
// and Reason.Abrupt and Reason.Flush say whether queued frames still go.
//
// Forwarding is a role: a connection whose room another machine holds is
// made RoleForwarded (ForwardTo) toward a link (NewLink: a connection in
// no table), and its messages are queued on the link as they came,
// whatever its transport; the link's own reader queues the holder's frames
// back on it.
//
// NAT introduction asks the transports (NAT): when a host and a client of
// a room both asked for it and the transport of both can introduce them,
// the core sends both [6][token] before the client's notice and [3]; the
// transport keeps the token with their addresses.
//
// # The forwarding path
//
// A reader reads each message into a pooled buffer with buf.Headroom bytes
// free in front. A client packet becomes [2][sender][payload] by writing
// the header into that headroom; a host SEND_ONE is delivered by moving
// the frame's start past its header; a pipe packet gets its id rewritten
// in place. The same buffer then goes to the receiver's queue: no copy, no
// allocation (TestForwardingAllocatesNothing). Nothing the relay sends is
// longer than 65,535 bytes, PurrNet's host socket's bound: a client payload
// over 65,530 bytes, whose framed packet would pass it, is dropped and
// counted (too_large_for_host), and the client stays.
//
// There is no global lock on the path. The sender's reader takes its
// room's lock to look up the receiver and queue the frame, and queueing
// takes the receiver's Conn.mu for an append, never blocking and never
// doing I/O. Holding the room lock across the queueing orders every frame
// against joins, leaves and kicks: a host never gets data from a client
// after that client's disconnect notice. Pipe routing looks the target up
// in a sharded table.
//
// A connection's queue is bounded (queue.go). Past the soft bound the
// slow-receiver clock runs, and a receiver still above it after
// Config.SlowReceiverTimeout is closed (slow_receiver); one that reaches
// the hard bound is closed at once (queue_overflow). A queued frame counts
// its pooled buffer's capacity, the memory it pins. No sender ever waits
// for a receiver. A writer takes up to MaxBatch frames at a time.
//
// A reader may write the frame it routes itself, with one non-blocking
// write on the receiver's socket, when the receiver's transport has a
// DirectWriter and three things hold: the reader has nothing more to read
// (Conn.SetDirect), the receiver's writer is idle with nothing queued, and
// frames to the receiver are not coming in bursts (its writer's last batch
// was one frame, and nothing was queued behind its last direct write). The
// claim is made under the receiver's Conn.mu inside the room lock, which
// fixes the frame's place in the receiver's order; the write happens after
// the room lock is released (Claim.Write). A frame the socket takes none
// of goes back to the front of the queue; part of one leaves its rest, and
// the socket, for the writer (TakeHandoff). queue.go draws the states.
//
// # Ownership
//
//   - Core: its configuration is static after New; the notifier and the
//     NAT transport are set once before use; the tables, the counters and
//     the flags are safe for concurrent use.
//   - Conn: id, core, transport and direct writer are static; role, room,
//     up and nat are written once by the connection's reader at
//     authentication (under the room's lock), and read freely by it;
//     direct is the reader's own; the queue, the close reason, the write
//     side's owner and batching are guarded by Conn.mu. Only the reader
//     calls Handle and Leave; only the transport's writer drains the queue,
//     and only the owner of the write side writes data frames.
//   - Room: everything but the name and the incarnation is guarded by
//     Room.mu, which is never held across I/O; its phase is its phase
//     machine (package phase), changed only through phase.go, and a
//     transition refused there is logged, counted and reported by
//     ConsistencyCheck.
//   - The room table and the two connection tables are one generic sharded
//     map (table.go), each shard under its own lock.
//
// The locks of this package (the room table's shards, Room.mu, Conn.mu,
// the connection tables' shards) are in the relay's one lock order, the
// table in the doc of package internal/lockrank: a shard, then a room,
// then a connection. Under a room's lock a transport's Closed and Wake
// run, and the notifier is told.
//
// # Rooms and host migration
//
// Allocate creates a room for the balancer: a new random epoch and
// incarnation, revision 1, fresh host and client secrets. The same
// allocation id for a live room replays it; another id for a live or
// reserved room is room_name_taken, unless the room is vacant, empty and
// past its players' recovery window (then a new incarnation takes the
// name); a draining relay replays but creates nothing; past the room or
// connection bound a new room is relay_full. migration.go has host
// migration: the incarnation, the generation, the credentials (the client
// credential for the incarnation, the host credential single-activation
// and rotated by every claim), the fencing token, the grant, the lease and
// the provisional host's lane, all under the room's lock and checked
// against the injected clock.
//
// The host leaving closes every client; a room that had clients stays,
// vacant, for host migration, and so does one whose provisional host
// left; an active host leaving an otherwise empty room ends it. An empty
// room expires EmptyRoomTimeout after it became empty, and a room whose
// allocation's host has not connected HostConnectTimeout after its
// allocation (or adoption) is released whoever else is in (Expire): an
// allocation never used does not hold a room slot; host migration's
// phases are never awaiting and keep their own windows.
//
// Deviations from PurrLay, on purpose: a host that logs in after clients
// receives [3] first and then one [0][ids...] packet (PurrLay sends the
// ids first; PurrNet's host accepts either order); a SEND_ONE with an
// empty payload is dropped; malformed host packets are dropped and
// counted instead of throwing. Every drop is counted by reason
// (purrfly_relay_dropped_packets_total), every ended connection too
// (purrfly_relay_disconnects_total).
package core
