package wstransport

import (
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/wsframe"
)

// conn is a core connection's WebSocket, its core.Transport: its writer
// goroutine (Transport.writer) drains the connection's queue; a graceful
// close is bounded by grace, after which drop ends the socket so that a
// writer blocked on a peer that does not read is released.
type conn struct {
	core  *core.Core      // static
	clock clock.Clock     // static: the close grace's
	ws    *websocket.Conn // static
	fc    *wsframe.Writer // static: the socket our data frames go through; nil: write through ws
	fr    *wsframe.Reader // static: the relay's reader of ws's frames (nil: coder/websocket reads, a link)
	drop  func()          // static: ends the socket at once
	grace time.Duration   // static: bound of a graceful close
	udp   bool            // static: the peer speaks PurrNet's UDP framing (a link carrying a UDP peer)
	wake  chan struct{}   // static, cap 1: signalled when a frame is queued
	done  chan struct{}   // static, closed once when the connection is closed
	ended chan struct{}   // static, closed once when the writer has returned

	// rest is the socket in transit from a sender's direct write that left
	// part of its frame, to the writer (wsframe.Rest): set by that sender
	// before its claim ends (core.Claim.Write), taken by the writer once
	// TakeWrite reports the hand-off. The core connection's write state
	// orders the two (core.Conn.mu).
	rest wsframe.Rest

	mu          lockrank.Mutex
	timer       clock.Timer // guarded by mu: the graceful close's bound
	writerEnded bool        // guarded by mu: the writer returned (no bound needed)
}

func newConn(c *core.Core, clk clock.Clock, ws *websocket.Conn, fc *wsframe.Writer, drop func(), grace time.Duration) *conn {
	return &conn{core: c, clock: clk, ws: ws, fc: fc, drop: drop, grace: grace,
		wake: make(chan struct{}, 1), done: make(chan struct{}), ended: make(chan struct{}),
		mu: lockrank.Mutex{Class: lockrank.WSTransport}}
}

// DirectWriter is the socket senders may write frames to themselves
// (core.Conn.Offer): an accepted connection's or a link's, when it is a
// plain socket.
func (t *conn) DirectWriter() core.DirectWriter {
	if t.fc == nil || !t.fc.Direct() {
		return nil
	}
	return t
}

// WriteDirect writes one frame to the socket for a sender that claimed
// it; a partly written frame leaves its rest, and the socket, for the
// writer.
func (t *conn) WriteDirect(b *buf.Buf) core.DirectResult {
	res, rest := t.fc.WriteDirect(b)
	if rest.Held() {
		t.rest = rest
	}
	return directResults[res]
}

// MaxDirect is the longest frame WriteDirect takes.
func (t *conn) MaxDirect() int { return wsframe.MaxDirect }

// directResults are the core's names for wsframe's direct write results.
var directResults = [...]core.DirectResult{
	wsframe.DirectWhole:   core.DirectWhole,
	wsframe.DirectPartial: core.DirectPartial,
	wsframe.DirectAgain:   core.DirectAgain,
	wsframe.DirectFailed:  core.DirectFailed,
	wsframe.DirectClosing: core.DirectClosing,
}

// takeRest takes the socket a direct write handed to the writer
// (core.TakeHandoff).
func (t *conn) takeRest() wsframe.Rest {
	r := t.rest
	t.rest = wsframe.Rest{}
	return r
}

// Wake says frames were queued.
func (t *conn) Wake() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Closed wakes the writer for its last round and, for an abrupt reason,
// drops the socket on a goroutine of its own (it may be called under a
// room lock); a graceful close arms the grace.
func (t *conn) Closed(reason core.Reason) {
	close(t.done)
	if reason.Abrupt() {
		t.core.Go(t.drop)
		return
	}
	t.mu.Lock()
	if !t.writerEnded && t.timer == nil {
		t.timer = t.clock.NewTimer(t.grace)
		go t.dropAfterGrace(t.timer.C())
	}
	t.mu.Unlock()
}

// dropAfterGrace drops the socket once the close grace has passed, unless
// the writer returned first.
func (t *conn) dropAfterGrace(expired <-chan time.Time) {
	select {
	case <-expired:
		t.drop()
	case <-t.ended:
	}
}

// endWriter records that the writer has returned: the connection is
// closed (or being dropped), so a pending close grace is disarmed. The
// writer calls it once.
func (t *conn) endWriter() {
	t.mu.Lock()
	t.writerEnded = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Unlock()
	close(t.ended)
}
