// Package wstransport is the relay's WebSocket transport: it upgrades
// connections with coder/websocket, reads and writes their frames with
// package wsframe, and hands the routing core (package core) each
// connection and each message, and, when a sender writes a frame itself,
// the connection's socket. It also runs the links that carry a connection
// to the machine holding its room. It imports the core, wsframe,
// udpframe (a link may carry a UDP peer) and coder/websocket, never the
// UDP transport.
//
// # Shape
//
//	Accept: the handshake checked (JSON errors), the pending pool (pending.go), Admit, coder/websocket's upgrade
//	  run: the handler goroutine reads and routes the first message, then a reader goroutine the rest (wsframe.Reader)
//	       a writer goroutine drains the core's queue in batches (wsframe.Writer: one system call per 32 KiB)
//	RunLink: a link's reader (coder/websocket reads) and writer (a masked wsframe.Writer)
//
// The handler goroutine reads the authentication, the deepest work a
// reader does (JSON; on a multi-machine relay maybe dialling the holder,
// Config.Forward), and then hands the reading to a fresh goroutine and
// returns: a goroutine's stack keeps the size it once needed, so an idle
// connection keeps a reader that has only ever run the read loop, and
// net/http's request state is garbage. The first message is bounded by
// Config.AuthTimeout, on the socket. Until it is in, the connection holds
// a place in the pending pool, bounded per source and in all; a full pool
// closes its oldest connection still waiting for its first message, so
// upgrades that never authenticate push out only each other. A message
// begun must be whole within Config.MessageTimeout (wsframe's stall bound).
//
// A reader that has nothing more buffered after a message lets the core
// write the frame it routes to the receiver's socket itself
// (core.Conn.SetDirect); a connection's conn is then the core's
// DirectWriter, and a direct write the socket takes only in part leaves
// the rest, with the socket (wsframe.Rest), for the connection's writer,
// which finishes it before anything else (core.TakeHandoff).
//
// # Closing
//
// An abrupt close (the peer gone, a slow receiver, an overflow, a write
// error) drops the socket at once, on a goroutine of the core's (it may be
// called under a room lock). A graceful one (kicked, host left, auth
// failed, shutdown) flushes what is queued (bounded by flushTimeout) and
// sends the close frame for its reason (close.go: the core's reasons as
// close codes), then waits for the peer's; it needs a peer that reads, so
// it arms Config.CloseGrace, after which the socket is dropped, failing a
// blocked write and the parked read; the writer disarms it when it ends. A
// link's close frame from the holder is passed on to the forwarded peer
// with its code and text (reasonOfClose) after the frames queued before
// it; a link that drops without one drops the peer at once. The edge
// closes a link's socket itself once LinkGrace has passed.
//
// # Ownership
//
//   - Transport: its configuration is static after New; the pending
//     pool is guarded by its own mu (a leaf of the lock order).
//   - conn (a connection's or a link's transport): its channels, socket,
//     reader and clock are static; rest is handed from the sender whose
//     direct write left it to the writer, ordered by the core's
//     connection state; the close grace's timer is guarded by conn.mu.
//   - The connection's reader owns the wsframe.Reader, but for the
//     writer's close handshake once the reader is done; the writer owns
//     the socket's writes, but for a sender's claimed frame, the reader's
//     control frames and coder/websocket's on a link, each taking the
//     socket's owner (wsframe.Writer) for whole frames.
//
// conn.mu and pendingPool.mu are in the relay's lock order (the table in
// the doc of package internal/lockrank): leaves; conn.mu is taken under a
// room's lock when the core closes a connection.
package wstransport
