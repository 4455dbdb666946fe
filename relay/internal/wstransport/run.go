package wstransport

import (
	"context"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/udpframe"
	"github.com/purrfly/purrfly/relay/internal/wsframe"
)

// run is the life of one accepted connection: a reader that routes what
// it reads (fr) and a second goroutine that writes (its data frames
// through fc); p.Ended runs once both have ended. A link from another
// machine carrying a UDP peer (p.UDP) speaks PurrNet's UDP framing: the
// delivery method is taken out of each message it reads
// (udpframe.Unframe) and put in front of each frame it writes.
//
// The calling goroutine, the HTTP handler, reads and routes the first
// message (the authentication) and then hands the reading to a fresh
// goroutine and returns. The authentication is the deepest work a reader
// does (JSON; on a multi-machine relay maybe dialling the holder), and a
// goroutine's stack keeps the size it once needed, so an idle connection
// keeps a reader that has only ever run the read loop. With the handler
// gone, net/http's request, response and 4 KiB buffers are garbage too.
func (t *Transport) run(ws *websocket.Conn, fc *wsframe.Writer, fr *wsframe.Reader, p Peer, slot *pendingSlot) {
	tc := newConn(t.cfg.Core, t.cfg.Clock, ws, fc, func() { _ = ws.CloseNow() }, t.cfg.CloseGrace)
	tc.fr, tc.udp = fr, p.UDP
	if p.UDP {
		fc.PrefixMethod()
	}
	c := t.cfg.Core.NewConn(tc)
	writerDone := make(chan struct{})
	go t.writer(tc, c, writerDone)
	// Closed before it leaves: a forwarded connection's leaving closes its
	// link, and the holder's answer (1000) must not overtake the reason
	// the peer is owed (1003 for a text message, 1009 past the size
	// limit).
	end := func(reason core.Reason) {
		c.Close(reason)
		t.cfg.Core.Leave(c)
		<-writerDone
		p.Ended()
	}
	reason := t.auth(tc, c, p.Forwarded, slot)
	if reason == core.ReasonNone && !c.Closing() {
		go func() { end(t.readLoop(tc, c)) }()
		return
	}
	end(reason)
}

// auth reads and routes a connection's first message, bounded by the
// authentication timeout, and returns why the connection ended
// (ReasonNone: it goes on). On a multi-machine relay, a connection whose
// first message names a room held by another machine (and that is not
// itself forwarded) is carried to that machine instead.
func (t *Transport) auth(tc *conn, c *core.Conn, forwarded bool, slot *pendingSlot) core.Reason {
	// Authenticated or not, the deadline only covers the first message
	// (and the control frames written while it is read).
	b, end := tc.fr.NextBefore(time.Now().Add(t.cfg.AuthTimeout)) // wall clock: the socket's own deadline bounds the authentication
	if end != wsframe.EndNone {
		return reasonOfEnd(end)
	}
	t.pending.arrived(slot) // no longer pushed out by newer upgrades
	if t.cfg.Forward != nil && !forwarded && t.cfg.Forward(c, b, false) {
		return core.ReasonNone
	}
	t.cfg.Core.Handle(c, b)
	return core.ReasonNone
}

// readLoop reads the messages after the first and hands them to the core
// until the connection ends; it returns why. A message after which
// nothing more is waiting to be read may be written to its receiver's
// socket by this goroutine (core.Conn.SetDirect).
func (t *Transport) readLoop(tc *conn, c *core.Conn) core.Reason {
	for {
		b, end, more := tc.fr.Next()
		c.SetDirect(!more)
		if end != wsframe.EndNone {
			return reasonOfEnd(end)
		}
		if tc.udp && !udpframe.Unframe(t.cfg.Core, c, b) {
			continue
		}
		t.cfg.Core.Handle(c, b)
		if c.Closing() {
			return core.ReasonNone
		}
	}
}

// writer is the connection's only writer: it drains the queue in batches
// and, once the connection is closed, flushes (when the reason allows),
// sends the close frame and returns. Each batch goes through tc.fc in one
// system call (an accepted connection's socket, or a link's); without it
// (a link over TLS) it writes through coder/websocket, one message at a
// time.
//
// A sender may have claimed the socket for one frame (core.Conn.Offer):
// the writer then waits for the claim to end, and finishes the frame's
// rest first when the direct write left one (core.TakeHandoff).
func (t *Transport) writer(tc *conn, c *core.Conn, done chan<- struct{}) {
	defer close(done)
	defer tc.endWriter()
	var batch []*buf.Buf
	for {
		select {
		case <-tc.done:
			tc.close(c, batch)
			return
		default:
		}
		var st core.TakeState
		batch, st = c.TakeWrite(batch[:0])
		if st == core.TakeHandoff && tc.takeRest().Finish(time.Time{}) != nil {
			buf.Release(batch)
			c.Close(core.ReasonWriteError)
			continue
		}
		if len(batch) == 0 {
			if st == core.TakeHandoff {
				continue // the write side is still the writer's: look again
			}
			if cap(batch) > core.ShrinkCap {
				batch = nil
			}
			select {
			case <-tc.wake:
			case <-tc.done:
			}
			continue
		}
		t.m.batches.Inc()
		if !writeBatch(context.Background(), tc.ws, tc.fc, batch) {
			c.Close(core.ReasonWriteError)
		}
	}
}

// close ends a closed connection's socket: it flushes what is still
// queued when the reason allows (bounded by flushTimeout), then sends the
// close frame and waits for the peer's, or drops the socket for abrupt
// reasons.
//
// A direct write still in flight ends first (it never blocks, and wakes
// the writer as it ends: the connection is closed); its rest is finished
// with the flush, or dropped.
func (tc *conn) close(c *core.Conn, batch []*buf.Buf) {
	reason, told := c.CloseStatus()
	ok := tc.flush(c, batch, reason)
	c.ReleaseQueue()
	// A flush that failed (timed out) may have left half a frame on the
	// wire: no close frame can follow it.
	if reason.Abrupt() || !ok {
		_ = tc.ws.CloseNow()
		return
	}
	code, text := wsCode(told)
	if tc.fr == nil {
		_ = tc.ws.Close(code, text)
		return
	}
	// The close handshake: our close frame, then the peer's, read by the
	// connection's reader if it is still reading or else here (bounded by
	// the close grace, which drops the socket), then the socket closes.
	if err := tc.fc.WriteClose(uint16(code), text, time.Now().Add(closeFrameTimeout)); err == nil { // wall clock: a real socket's write deadline
		tc.fr.AwaitClose()
	}
	_ = tc.ws.CloseNow()
}

// flush writes what is still queued when reason allows (releases it
// otherwise) and reports whether the socket is still whole.
func (tc *conn) flush(c *core.Conn, batch []*buf.Buf, reason core.Reason) bool {
	ok := true
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	for {
		var st core.TakeState
		batch, st = c.TakeWrite(batch[:0])
		if st == core.TakeClaimed {
			<-tc.wake
			continue
		}
		if st == core.TakeHandoff {
			// The rest of a frame already begun is finished for any
			// graceful close, even one that flushes nothing else (an
			// unsupported message's): without it no close frame could
			// follow.
			if ok && !reason.Abrupt() {
				ok = tc.takeRest().Finish(deadline) == nil
			} else {
				tc.takeRest().Drop() // half a frame: no close frame can follow
				ok = false
			}
		}
		if len(batch) == 0 {
			if st == core.TakeHandoff {
				continue
			}
			return ok
		}
		if reason.Flush() && ok {
			ok = writeBatch(ctx, tc.ws, tc.fc, batch)
		} else {
			buf.Release(batch)
		}
	}
}

// writeBatch writes every frame of batch in order and releases them; on the
// first error it releases the rest and reports false. With fc the whole
// batch goes out in one system call, bounded by ctx's deadline.
func writeBatch(ctx context.Context, ws *websocket.Conn, fc *wsframe.Writer, batch []*buf.Buf) bool {
	if fc != nil {
		deadline, _ := ctx.Deadline()
		return fc.WriteBatch(batch, deadline) == nil
	}
	ok := true
	for i, b := range batch {
		if ok && ws.Write(ctx, websocket.MessageBinary, b.Frame()) != nil {
			ok = false
		}
		buf.Put(b)
		batch[i] = nil
	}
	return ok
}
