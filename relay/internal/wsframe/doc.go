// Package wsframe reads and writes the WebSocket frames (RFC 6455) of the
// relay's connections itself, on the socket coder/websocket upgraded. The
// library upgrades (and, on a link to a holder machine, reads and answers
// control frames); the relay reads an accepted connection's frames and
// writes every data frame here, because the library flushes each message
// with a system call of its own and reads through a channel-based lock.
//
// # Shape
//
//	accepted connection: Hijacker (at the upgrade) -> Reader (the peer's frames) + Writer (unmasked server frames)
//	link to a holder:    DialContext (the dial) -> Writer (masked client frames); coder/websocket reads
//
// A Reader parses the peer's masked frames out of small buffers (conn.go:
// a 256-byte bufio.Reader over a pooled 4 KiB read buffer held only while
// it has unread bytes) into pooled message buffers (package buf), and
// answers pings and the close handshake through the Writer. A Writer
// encodes a batch of frames into one pooled 32 KiB buffer and writes it
// with one system call, and lets a sender write one frame itself with one
// non-blocking system call (WriteDirect).
//
// # Who owns the socket
//
// The socket's write side has one owner at a time, Writer.own (a lock of
// the lock-rank table, internal/lockrank), held for whole frames: by the
// connection's writer for a batch (WriteBatch), by whoever writes a
// control frame (WriteControl, WriteClose: the reader's pong, the close
// handshake), by coder/websocket on a link (Write: its pong and close
// frames, one whole frame per call), and by a sender writing one frame
// itself (WriteDirect), which only tries to take it and never waits.
//
// A direct write that the socket takes only part of cannot give the
// socket up: half a frame is on the wire, and anything written before its
// rest would corrupt the stream. So it hands the ownership on, with the
// rest, as a Rest value: the socket stays owned (locked) while the Rest
// travels to the connection's writer (the relay's core orders that
// hand-off with its connection's write state), which calls Finish (the
// rest written, the socket released) or Drop (the connection is dropped;
// nothing may follow half a frame). Exactly one of them, once; until then
// every other writer waits, so a pong asked for meanwhile goes out after
// the frame. In the lock-rank checker the hand-off is explicit too
// (HandOff, then Adopt by the goroutine that finishes it).
//
// The Reader's mutex (Reader.mu, also in the lock-rank table) is held by
// whoever reads frames: the connection's reader for a message (Next), or
// the writer's close handshake once the reader is done (AwaitClose).
// Whichever holds it sees the peer's close frame, and the other learns of
// it.
//
// # What coder/websocket is relied on for
//
// The relay keeps coder/websocket for the upgrade and a link's reads, and
// takes the socket from under it. These are the library's habits it
// relies on, each pinned by a test that fails on a version without them:
//
//   - it finds the Hijacker it is given and hijacks through it, after
//     writing its 101 (through net/http, which the Hijacker flushes): the
//     Writer sees only frames (TestCoderLeavesTheSocketToUs);
//   - it reads the connection only through the bufio.Reader handed to it
//     at the hijack, only when asked, and runs no goroutine of its own, so
//     a frame sent right behind the upgrade request is the Reader's
//     (TestCoderLeavesTheSocketToUs, TestCoderReadsThroughTheHandedReader);
//   - it keeps the small pair it is handed, so net/http's 4 KiB pair is
//     garbage after the upgrade (TestHijackHandsSmallBuffers);
//   - it writes each control frame in one Write call, so none can come
//     between the parts of a batch (TestCoderCloseFrameIsOneWrite, and
//     TestLinkConnBatch on a link, where its pong and close are its only
//     frames).
package wsframe
