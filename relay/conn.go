package relay

import (
	"sync"
	"sync/atomic"
	"time"

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
	// roleForwarded: the peer's room is on another machine of the app; its
	// frames go to the link toward that machine (conn.up) and the holder
	// sees it as an ordinary connection (forward.go).
	roleForwarded
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
	reasonUpstream                  // forwarded: the holder closed the link; conn.upstream says how
	reasonUpstreamLost              // forwarded: the link to the holder dropped without a close frame
	reasonClientLeft                // a link: the forwarded client's connection ended (close 1000 to the holder)
	reasonRoomGone                  // the room ended here: the balancer gave its name to another incarnation (1012)
	reasonPeerTimeout               // UDP: nothing heard from the peer within the UDP timeout
	reasonMigrated                  // a claim moved the room to a new generation: every old socket goes
	reasonRejoin                    // isolated during a migration lease: the host activated, reconnect to it
	reasonRoomClosed                // an operator closed the room (DELETE /v1/rooms/{name}): 1000 "room closed"
	numReasons
)

var reasonNames = [numReasons]string{"", "peer_closed", "auth_failed", "auth_timeout", "text_frame",
	"message_too_big", "kicked", "host_left", "slow_receiver", "queue_overflow", "write_error", "shutdown",
	"upstream_closed", "upstream_lost", "client_left", "room_gone", "peer_timeout", "migrated", "rejoin", "room_closed"}

func (r closeReason) String() string { return reasonNames[r] }

// abrupt reasons close the transport at once, without a close handshake:
// the peer is gone or not reading, so nothing could be delivered anyway.
func (r closeReason) abrupt() bool {
	switch r {
	case reasonPeerClosed, reasonAuthTimeout, reasonSlowReceiver, reasonQueueOverflow, reasonWriteError, reasonTooBig,
		reasonUpstreamLost, reasonPeerTimeout:
		return true
	}
	return false
}

// flush reports whether frames queued before the close are still written
// (the [4] of a failed auth, a host's last packets before a kick, ...).
func (r closeReason) flush() bool { return !r.abrupt() && r != reasonTextFrame }

// transport is what the routing core needs of a connection's transport
// (ws.go: WebSocket; udp_conn.go: LiteNetLib; forward.go: a link to the
// holder machine). Both calls must be quick and never block: they run on
// readers, possibly under a room lock.
type transport interface {
	// wake says frames were queued: the transport's writer takes them
	// (conn.takeBatch).
	wake()
	// closed says the conn was closed (once) for reason: a graceful reason
	// (reason.flush) delivers what is queued first, an abrupt one drops the
	// transport at once; the transport then ends and its reader calls
	// core.leave.
	closed(reason closeReason)
}

// nopTransport is the transport of a conn without one (core tests).
type nopTransport struct{}

func (nopTransport) wake()              {}
func (nopTransport) closed(closeReason) {}

// framing is how a connection's packets are framed (wire/udp.go): PurrNet's
// WebSocket framing, or its UDP framing with LiteNetLib delivery methods in
// the packets (a UDP peer, or a link carrying one for another machine).
type framing uint8

const (
	framingWS framing = iota
	framingUDP
)

// conn is one peer connection as the routing core sees it, whatever its
// transport. The transport delivers messages to core.handle from one
// reader at a time (a WebSocket's reader goroutine; the UDP socket reader
// serialised per peer), calls core.leave once at the end, and drains the
// queue from its writer.
type conn struct {
	id      wire.ConnID // static
	core    *core       // static
	t       transport   // static
	framing framing     // static

	// role and room are written once by the reader at authentication, under
	// room.mu (rooms) or before the conn enters the pipe table (pipes). The
	// reader reads them freely; anyone else reads them under room.mu. up is
	// written with role (roleForwarded): the link toward the holder
	// machine that the conn's frames are queued on (forward.go).
	role role
	room *room
	up   *conn
	// nat is written once by the reader at authentication: the peer asked
	// for NAT introduction ({"nat":true}); read under room.mu.
	nat bool
	// isolated is guarded by room.mu: a client that joined during a
	// migration lease, not exposed to the provisional host (migration.go).
	isolated bool

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
	// upstream is, for reasonUpstream, why the holder closed the link (its
	// close status in the core's terms), which the transport tells the
	// forwarded peer; guarded by mu, set with reason.
	upstream closeReason
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
	c.t.wake()
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

// queued reports whether frames are waiting.
func (c *conn) queued() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.q) > 0
}

// close marks c closed for reason (the first reason wins) and tells its
// transport, which flushes and ends gracefully or drops at once. It never
// blocks. It reports whether this call closed c.
func (c *conn) close(reason closeReason) bool {
	return c.closeWith(reason, reasonNone)
}

// closeUpstream closes a forwarded peer the way its holder closed the
// link (upstream: the holder's close status in the core's terms), so the
// peer sees what a direct connection would have seen.
func (c *conn) closeUpstream(upstream closeReason) bool {
	return c.closeWith(reasonUpstream, upstream)
}

func (c *conn) closeWith(reason, upstream closeReason) bool {
	if reason == reasonNone {
		reason = reasonPeerClosed
	}
	c.mu.Lock()
	if c.reason != reasonNone {
		c.mu.Unlock()
		return false
	}
	c.reason, c.upstream = reason, upstream
	c.closing.Store(true)
	c.mu.Unlock()
	if !c.link {
		c.core.m.disconnect[reason].Inc()
	}
	c.t.closed(reason)
	return true
}

// closeReason returns why c was closed (reasonNone while open).
func (c *conn) closeReason() closeReason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// closeStatus returns why c was closed and the reason its transport tells
// the peer: the holder's own for a forwarded peer (reasonUpstream).
func (c *conn) closeStatus() (reason, told closeReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason == reasonUpstream {
		return c.reason, c.upstream
	}
	return c.reason, c.reason
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
