package relay

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/purrfly/purrfly/wire"
)

// Queue bounds of one connection. PurrNet treats its WebSocket as a
// reliable, ordered stream: a frame silently lost desynchronizes the game.
// So the relay never drops a frame for a live receiver; it bounds the
// backlog instead. Above the soft bound (512 frames or 1 MiB) the
// slow-receiver clock runs, and a receiver still above it after the
// deadline is disconnected; reaching the hard bound (4096 frames or 8 MiB)
// disconnects at once. Bytes are the memory the queue pins: the pooled
// buffers' capacity, not the frames' length. A healthy receiver that falls
// behind for a burst and catches up within the deadline loses nothing.
const (
	softQueueFrames = 512
	softQueueBytes  = 1 << 20
	hardQueueFrames = 4096
	hardQueueBytes  = 8 << 20
	// maxBatch bounds the frames a writer takes at once, so that the queue
	// length stays an honest measure of the backlog.
	maxBatch  = 64
	shrinkCap = 256
)

type role uint8

const (
	roleNone   role = iota // not authenticated yet
	roleClient             // an ordinary client of a room
	roleHost               // the room's host
	rolePipe               // a pipe peer (no room)
)

// closeReason says why a connection ended; it picks the close code, whether
// queued frames are flushed first, and the metric label.
type closeReason uint8

const (
	reasonNone          closeReason = iota
	reasonPeerClosed                // the peer closed or the read failed
	reasonAuthFailed                // [4] was sent
	reasonAuthTimeout               // no auth message in time
	reasonTextFrame                 // a text frame arrived
	reasonTooBig                    // a message over 65,535 bytes
	reasonKicked                    // the host kicked this client
	reasonHostLeft                  // the room's host left
	reasonSlowReceiver              // the send queue stayed full past the deadline
	reasonQueueOverflow             // the send queue hit its hard bound
	reasonWriteError                // a write failed
	reasonShutdown                  // the relay is going away (1012)
	reasonUpstream                  // forwarded: the holder closed the link; its close code is passed on
	reasonUpstreamLost              // forwarded: the link to the holder dropped without a close frame
	reasonClientLeft                // a link: the forwarded client's connection ended (close 1000 to the holder)
	reasonRoomGone                  // the room ended here: the balancer gave its name to another incarnation (1012)
	numReasons
)

var reasonNames = [numReasons]string{"", "peer_closed", "auth_failed", "auth_timeout", "text_frame",
	"message_too_big", "kicked", "host_left", "slow_receiver", "queue_overflow", "write_error", "shutdown",
	"upstream_closed", "upstream_lost", "client_left", "room_gone"}

func (r closeReason) String() string { return reasonNames[r] }

// abrupt reasons close the transport at once, without a close handshake:
// the peer is gone or not reading, so nothing could be delivered anyway.
func (r closeReason) abrupt() bool {
	switch r {
	case reasonPeerClosed, reasonAuthTimeout, reasonSlowReceiver, reasonQueueOverflow, reasonWriteError, reasonTooBig,
		reasonUpstreamLost:
		return true
	}
	return false
}

// flush reports whether frames queued before the close are still written
// (the [4] of a failed auth, a host's last packets before a kick, ...).
func (r closeReason) flush() bool { return !r.abrupt() && r != reasonTextFrame }

// wsCode is the WebSocket close code and text for the reason.
func (r closeReason) wsCode() (websocket.StatusCode, string) {
	switch r {
	case reasonAuthFailed:
		return websocket.StatusPolicyViolation, "authentication failed"
	case reasonTextFrame:
		return websocket.StatusUnsupportedData, "binary messages only"
	case reasonTooBig:
		return websocket.StatusMessageTooBig, "message too big"
	case reasonKicked:
		return websocket.StatusNormalClosure, "kicked"
	case reasonHostLeft:
		return websocket.StatusNormalClosure, "host left"
	case reasonShutdown:
		return websocket.StatusServiceRestart, "relay restarting"
	case reasonRoomGone:
		return websocket.StatusServiceRestart, "room moved"
	case reasonSlowReceiver, reasonQueueOverflow:
		return websocket.StatusPolicyViolation, "too slow"
	}
	return websocket.StatusNormalClosure, ""
}

// conn is one peer connection as the routing core sees it, whatever its
// transport. The transport owns one reader goroutine (the only caller of
// core.handle and core.leave for this conn) and one writer goroutine (the
// only consumer of the queue and the only caller of the transport's write).
type conn struct {
	id   wire.ConnID   // static
	core *core         // static
	wake chan struct{} // static, cap 1: signalled when a frame is queued
	done chan struct{} // static, closed once by close

	// abort drops the transport at once (no handshake). Set by the transport
	// before the conn is visible to anyone else; called on its own goroutine.
	abort func()

	// role and room are written once by the reader at authentication, under
	// room.mu (rooms) or before the conn enters the pipe table (pipes). The
	// reader reads them freely; anyone else reads them under room.mu.
	role role
	room *room

	// link is static: true for the upstream side of a forwarded connection
	// (forward.go), a queue and writer toward the holder machine that is no
	// connection of this relay (not in the tables, not in the metrics).
	link bool

	// closing mirrors reason != reasonNone for lock-free checks on the hot path.
	closing atomic.Bool

	mu        sync.Mutex
	q         []*buf      // guarded by mu: frames waiting for the writer, FIFO
	qBytes    int         // guarded by mu: the queued buffers' capacity (buf.weight), what the queue pins
	fullSince time.Time   // guarded by mu: first refusal since the writer last drained; zero if none
	reason    closeReason // guarded by mu: set once by close
	// upCode and upText are the holder's close status, passed on to a
	// forwarded client (reasonUpstream); guarded by mu, set with reason.
	upCode websocket.StatusCode
	upText string
	// grace drops the transport if a graceful close has not ended it within
	// core.closeGrace; writerEnded says the writer is gone (no grace needed
	// any more). Both guarded by mu.
	grace       *time.Timer
	writerEnded bool
}

// enqueue hands b to c's writer. It never blocks and never does I/O, so it
// may be called with a room lock held. It takes ownership of b and reports
// whether b was queued: b is dropped only when c is already closing or
// when queuing it would pass the hard bound (which closes c).
func (c *conn) enqueue(b *buf, dir int) bool {
	m := c.core.m
	n := b.len()
	w := b.weight()
	c.mu.Lock()
	if c.reason != reasonNone {
		c.mu.Unlock()
		putBuf(b)
		m.drop(dropReceiverClosed)
		return false
	}
	if len(c.q) >= hardQueueFrames || c.qBytes+w > hardQueueBytes {
		c.mu.Unlock()
		putBuf(b)
		m.drop(dropQueueOverflow)
		c.close(reasonQueueOverflow)
		return false
	}
	c.q = append(c.q, b)
	c.qBytes += w
	slow := false
	if len(c.q) > softQueueFrames || c.qBytes > softQueueBytes {
		now := c.core.clock.Now()
		if c.fullSince.IsZero() {
			c.fullSince = now
		} else if now.Sub(c.fullSince) >= c.core.slowTimeout {
			slow = true
		}
	}
	c.mu.Unlock()
	m.forwarded(dir, n)
	select {
	case c.wake <- struct{}{}:
	default:
	}
	if slow {
		c.close(reasonSlowReceiver)
	}
	return true
}

// takeBatch moves up to maxBatch frames from the front of the queue to dst
// (the writer's own slice). Once the backlog is back under the soft bound
// the slow-receiver clock stops.
func (c *conn) takeBatch(dst []*buf) []*buf {
	c.mu.Lock()
	k := min(len(c.q), maxBatch)
	for _, b := range c.q[:k] {
		c.qBytes -= b.weight()
	}
	dst = append(dst, c.q[:k]...)
	rest := copy(c.q, c.q[k:])
	clear(c.q[rest:])
	c.q = c.q[:rest]
	if len(c.q) <= softQueueFrames && c.qBytes <= softQueueBytes {
		c.fullSince = time.Time{}
	}
	if rest == 0 && cap(c.q) > shrinkCap {
		c.q = nil // a burst is over: do not keep its slice on an idle conn
	}
	c.mu.Unlock()
	return dst
}

// close marks c closed for reason (the first reason wins), wakes its
// writer and, for abrupt reasons, drops the transport on a new goroutine so
// that a writer blocked on a peer that does not read is released. It never
// blocks. It reports whether this call closed c.
func (c *conn) close(reason closeReason) bool {
	return c.closeWith(reason, 0, "")
}

// closeUpstream closes a forwarded client with the status its holder
// closed the link with, so the client sees exactly what a direct
// connection would have seen.
func (c *conn) closeUpstream(code websocket.StatusCode, text string) bool {
	return c.closeWith(reasonUpstream, code, text)
}

func (c *conn) closeWith(reason closeReason, code websocket.StatusCode, text string) bool {
	if reason == reasonNone {
		reason = reasonPeerClosed
	}
	c.mu.Lock()
	if c.reason != reasonNone {
		c.mu.Unlock()
		return false
	}
	c.reason = reason
	c.upCode, c.upText = code, text
	c.closing.Store(true)
	c.mu.Unlock()
	close(c.done)
	if !c.link {
		c.core.m.disconnect[reason].Inc()
	}
	if reason.abrupt() && c.abort != nil {
		c.core.goAbort(c.abort)
	} else {
		c.armCloseGrace()
	}
	return true
}

// closeReason returns why c was closed (reasonNone while open).
func (c *conn) closeReason() closeReason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// closeStatus is the WebSocket close code and text for c's close reason:
// the holder's own status for a forwarded client (reasonUpstream).
func (c *conn) closeStatus() (closeReason, websocket.StatusCode, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason == reasonUpstream {
		return c.reason, c.upCode, c.upText
	}
	code, text := c.reason.wsCode()
	return c.reason, code, text
}

// releaseQueue frees whatever is still queued (after close).
func (c *conn) releaseQueue() {
	c.mu.Lock()
	q := c.q
	c.q = nil
	c.qBytes = 0
	c.mu.Unlock()
	for _, b := range q {
		putBuf(b)
	}
}

// armCloseGrace starts the bound of a graceful close: the flush and the
// close handshake need a peer that reads, and a writer blocked on one that
// does not (full TCP window) would never return. Past core.closeGrace the
// transport is dropped, which fails the blocked write and the parked read.
// The writer disarms it when it ends (endWriter).
func (c *conn) armCloseGrace() {
	if c.abort == nil {
		return
	}
	c.mu.Lock()
	if !c.writerEnded && c.grace == nil {
		c.grace = time.AfterFunc(c.core.closeGrace, c.abort)
	}
	c.mu.Unlock()
}

// endWriter records that c's writer has returned: the transport is closed
// (or being dropped), so a pending close grace is disarmed.
func (c *conn) endWriter() {
	c.mu.Lock()
	c.writerEnded = true
	if c.grace != nil {
		c.grace.Stop()
	}
	c.mu.Unlock()
}
