package core

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/buf"
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
	MaxBatch  = 64
	ShrinkCap = 256
)

type Role uint8

const (
	RoleNone   Role = iota // not authenticated yet
	RoleClient             // an ordinary client of a room
	RoleHost               // the room's host
	RolePipe               // a pipe peer (no room)
	// roleForwarded: the peer's room is on another machine of the app; its
	// frames go to the link toward that machine (conn.up) and the holder
	// sees it as an ordinary connection (forward.go).
	RoleForwarded
)

// closeReason says why a connection ended; it picks the close code, whether
// queued frames are flushed first, and the metric label.
type Reason uint8

const (
	ReasonNone          Reason = iota
	ReasonPeerClosed           // the peer closed or the read failed
	ReasonAuthFailed           // [4] was sent
	ReasonAuthTimeout          // no auth message in time
	ReasonUnsupported          // the peer sent a kind of message the relay does not carry (a WebSocket text message)
	ReasonTooBig               // a message over 65,535 bytes
	ReasonKicked               // the host kicked this client
	ReasonHostLeft             // the room's host left
	ReasonSlowReceiver         // the send queue stayed full past the deadline
	ReasonQueueOverflow        // the send queue hit its hard bound
	ReasonWriteError           // a write failed
	ReasonShutdown             // the relay is going away (1012)
	ReasonUpstream             // forwarded: the holder closed the link; conn.upstream says how
	ReasonUpstreamLost         // forwarded: the link to the holder dropped without a close frame
	ReasonClientLeft           // a link: the forwarded client's connection ended (close 1000 to the holder)
	ReasonRoomGone             // the room ended here: the balancer gave its name to another incarnation (1012)
	ReasonPeerTimeout          // the transport heard nothing from the peer within its timeout
	ReasonMigrated             // a claim moved the room to a new generation: every old socket goes
	ReasonRejoin               // isolated during a migration lease: the host activated, reconnect to it
	ReasonRoomClosed           // an operator closed the room (DELETE /v1/rooms/{name}): 1000 "room closed"
	numReasons
)

var reasonNames = [numReasons]string{"", "peer_closed", "auth_failed", "auth_timeout", "unsupported_message",
	"message_too_big", "kicked", "host_left", "slow_receiver", "queue_overflow", "write_error", "shutdown",
	"upstream_closed", "upstream_lost", "client_left", "room_gone", "peer_timeout", "migrated", "rejoin", "room_closed"}

func (r Reason) String() string { return reasonNames[r] }

// abrupt reasons close the transport at once, without a close handshake:
// the peer is gone or not reading, so nothing could be delivered anyway.
func (r Reason) Abrupt() bool {
	switch r {
	case ReasonPeerClosed, ReasonAuthTimeout, ReasonSlowReceiver, ReasonQueueOverflow, ReasonWriteError, ReasonTooBig,
		ReasonUpstreamLost, ReasonPeerTimeout:
		return true
	}
	return false
}

// flush reports whether frames queued before the close are still written
// (the [4] of a failed auth, a host's last packets before a kick, ...). A
// peer that sent what the relay does not carry is told why, and nothing
// more.
func (r Reason) Flush() bool { return !r.Abrupt() && r != ReasonUnsupported }

// transport is what the routing core needs of a connection's transport
// (ws.go: WebSocket; udp_conn.go: LiteNetLib; forward.go: a link to the
// holder machine). Both calls must be quick and never block: they run on
// readers, possibly under a room lock.
type Transport interface {
	// wake says frames were queued: the transport's writer takes them
	// (conn.takeBatch).
	Wake()
	// closed says the conn was closed (once) for reason: a graceful reason
	// (reason.flush) delivers what is queued first, an abrupt one drops the
	// transport at once; the transport then ends and its reader calls
	// core.leave.
	Closed(reason Reason)
}

// Direct writes (issue 16). At game rates every frame used to be a hand-off:
// queued, the receiver's writer woken, one write, the writer parked again:
// one wake-up per message that an echo server, which writes on the
// goroutine that read, never pays. So when a receiver's writer is idle
// with nothing queued, a sender's reader with nothing more to read writes
// the frame to the receiver's socket itself, without blocking (send,
// claim.write). The write side of such a connection has one owner at a
// time, recorded in conn.wr under conn.mu:
//
//	wrIdle --send claims--> wrDirect --whole, or nothing written (frame requeued)--> wrIdle
//	                            \--part written: rest + frame mutex to the writer--> wrHandoff --takeWrite--> wrWriter
//	wrIdle --takeWrite finds frames--> wrWriter --takeWrite finds none--> wrIdle
//
// A frame queued while the write side is owned waits for its owner: after
// the one claimed, after the rest of a handed-off frame, in order.

// writeState is who owns a connection's data frames on its socket.
type writeState uint8

const (
	wrIdle    writeState = iota // nobody: the writer is parked, or about to look at the queue
	wrWriter                    // the writer, from taking frames until it finds none
	wrDirect                    // a sender, for the one frame it claimed (conn.send)
	wrHandoff                   // the writer, from the end of a direct write that left part of its frame
)

// directWriter is a transport's socket that a sender may write one frame
// to itself (a WebSocket on a plain socket, ws.go).
type DirectWriter interface {
	// writeDirect writes b as one frame without blocking. It releases b,
	// except for directAgain (nothing was written: b is the caller's).
	// For directPartial the frame's rest and the socket are left for the
	// writer (takeWrite reports takeHandoff; the transport's writer
	// finishes or drops them).
	WriteDirect(b *buf.Buf) DirectResult
	// maxDirect is the longest frame writeDirect takes; longer ones are
	// queued.
	MaxDirect() int
}

// directResult is how a direct write went.
type DirectResult uint8

const (
	DirectWhole   DirectResult = iota // the socket took the whole frame
	DirectPartial                     // it took part of it; the rest is the writer's
	DirectAgain                       // it took nothing (full, or a control frame being written)
	DirectFailed                      // the socket failed or was closed; the frame is lost with it
	DirectClosing                     // a close frame went out (its reason closes the conn) or the socket is broken: the frame is dropped
	numDirectResults
)

var DirectResultNames = [numDirectResults]string{"whole", "partial", "again", "failed", "closing"}

// nopTransport is the transport of a conn without one (core tests).
type nopTransport struct{}

func (nopTransport) Wake()         {}
func (nopTransport) Closed(Reason) {}

// conn is one peer connection as the routing core sees it, whatever its
// transport. The transport delivers messages to core.handle from one
// reader at a time (a WebSocket's reader goroutine; the UDP socket reader
// serialised per peer), calls core.leave once at the end, and drains the
// queue from its writer.
type Conn struct {
	id   wire.ConnID // static
	core *Core       // static
	t    Transport   // static

	// role and room are written once by the reader at authentication, under
	// room.mu (rooms) or before the conn enters the pipe table (pipes). The
	// reader reads them freely; anyone else reads them under room.mu. up is
	// written with role (roleForwarded): the link toward the holder
	// machine that the conn's frames are queued on (forward.go).
	role Role
	room *Room
	up   *Conn
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

	// dw and dwMax are static: the transport's direct write (a WebSocket
	// on a plain socket) and the longest frame it takes, or nil: every
	// frame goes through the queue.
	dw    DirectWriter
	dwMax int
	// direct is owned by the reader: set while it routes a message after
	// which its input has nothing more buffered, so that the frame it
	// routes may be written by the reader itself (send). A reader with
	// more to read queues instead and moves on: its receivers' writers
	// write in parallel and batch.
	direct bool

	mu        lockrank.Mutex
	wr        writeState // guarded by mu: who owns the socket's data frames (dw only)
	batching  bool       // guarded by mu: frames to c come in bursts: leave them to the writer (see send)
	q         []*buf.Buf // guarded by mu: frames waiting for the writer, FIFO
	qBytes    int        // guarded by mu: the queued buffers' capacity (buf.weight), what the queue pins
	fullSince time.Time  // guarded by mu: first refusal since the writer last drained; zero if none
	reason    Reason     // guarded by mu: set once by close
	// upstream is, for reasonUpstream, why the holder closed the link (its
	// close status in the core's terms), which the transport tells the
	// forwarded peer; guarded by mu, set with reason.
	upstream Reason
}

// enqueue hands b to c's writer. It never blocks and never does I/O, so it
// may be called with a room lock held. It takes ownership of b and reports
// whether b was queued: b is dropped only when c is already closing or
// when queuing it would pass the hard bound (which closes c).
func (c *Conn) Enqueue(b *buf.Buf, dir int) bool {
	_, ok := c.Offer(b, dir, false)
	return ok
}

// send is enqueue for a reader that may write b itself (direct: its own
// input has nothing more buffered, conn.direct). When c's transport takes
// direct writes, its writer is idle with nothing queued and frames to c
// are not coming in bursts (conn.batching), send claims c's socket for b
// instead of queueing it: b's place in c's order is fixed by the claim
// (made under c.mu, inside the caller's room lock), and nothing else is
// written to c until the claim ends. The caller must call write on the
// result once it holds no lock; for a queued (or dropped) frame write does
// nothing. Like enqueue it never blocks and takes ownership of b.
func (c *Conn) Send(b *buf.Buf, dir int, direct bool) Claim {
	cl, _ := c.Offer(b, dir, direct)
	return cl
}

// offer is enqueue and send: it claims c's socket for b (direct allowed
// and c's write side idle and empty), queues b, or drops it.
func (c *Conn) Offer(b *buf.Buf, dir int, direct bool) (Claim, bool) {
	m := c.core.m
	n := b.Len()
	w := b.Weight()
	c.mu.Lock()
	if c.reason != ReasonNone {
		c.mu.Unlock()
		buf.Put(b)
		m.drop(DropReceiverClosed)
		return Claim{}, false
	}
	if direct && c.dw != nil && c.wr == wrIdle && len(c.q) == 0 && !c.batching && n <= c.dwMax {
		c.wr = wrDirect
		c.mu.Unlock()
		m.forwarded(dir, n)
		return Claim{c: c, b: b}, true
	}
	if len(c.q) >= hardQueueFrames || c.qBytes+w > hardQueueBytes {
		c.mu.Unlock()
		buf.Put(b)
		m.drop(DropQueueOverflow)
		c.Close(ReasonQueueOverflow)
		return Claim{}, false
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
	// Only an idle writer needs waking: a busy one looks at the queue
	// again before it parks, and a direct write that ends with frames
	// queued behind it wakes the writer itself. A frame that arrives
	// during a direct write says frames to c come faster than one system
	// call each: the next ones are left for the writer to batch.
	wake := c.dw == nil || c.wr == wrIdle
	if c.wr == wrDirect {
		c.batching = true
	}
	c.mu.Unlock()
	m.forwarded(dir, n)
	if wake {
		c.t.Wake()
	}
	if slow {
		c.Close(ReasonSlowReceiver)
	}
	return Claim{}, true
}

// claim is a frame a sender claimed c's socket for (conn.send); the zero
// claim is a frame that was queued or dropped.
type Claim struct {
	c *Conn
	b *buf.Buf
}

// write writes a claimed frame to its connection's socket without
// blocking, and ends the claim: what the socket did not take is the
// writer's (the rest of a partly written frame, with the frame mutex, or
// the whole frame back at the front of the queue), and the writer is woken
// when it has something to do. The caller holds no lock.
func (cl Claim) Write() {
	c := cl.c
	if c == nil {
		return
	}
	res := c.dw.WriteDirect(cl.b)
	c.core.m.direct[res].Inc()
	c.mu.Lock()
	switch res {
	case DirectAgain:
		// Nothing was written (a full socket, or the reader writing a
		// control frame): the frame goes first in the queue, still ahead
		// of whatever was queued during the attempt, for the writer, which
		// may block. A closing conn gets it too: a graceful close flushes
		// it, an abrupt one releases it. (It is not held to the queue's
		// bounds again: it was admitted when it was claimed, so the queue
		// passes them by one frame at most.)
		c.q = slices.Insert(c.q, 0, cl.b)
		c.qBytes += cl.b.Weight()
		c.wr = wrIdle
		c.batching = true
	case DirectPartial:
		c.wr = wrHandoff
		c.batching = true
	default:
		c.wr = wrIdle
	}
	wake := c.wr == wrHandoff || len(c.q) > 0 || c.reason != ReasonNone
	c.mu.Unlock()
	if wake {
		c.t.Wake()
	}
	if res == DirectFailed {
		c.Close(ReasonWriteError)
	}
}

// takeBatch moves up to maxBatch frames from the front of the queue to dst
// (the writer's own slice). Once the backlog is back under the soft bound
// the slow-receiver clock stops. A transport without direct writes (UDP)
// only ever needs this.
func (c *Conn) TakeBatch(dst []*buf.Buf) []*buf.Buf {
	dst, _ = c.TakeWrite(dst)
	return dst
}

// takeState is what takeWrite found of c's write side besides the frames.
type TakeState uint8

const (
	TakeFrames  TakeState = iota // the frames taken (none: the writer is idle and may park)
	TakeClaimed                  // a direct write is in flight: nothing taken; its end wakes the writer
	TakeHandoff                  // a direct write left the rest of its frame: finish it before the frames
)

// takeWrite is the writer's takeBatch. While frames are taken (or a
// direct write's rest handed over) the write side is the writer's, so no
// sender claims it; once the writer finds nothing to do it is idle again.
// The size of each batch tells whether frames to c come in bursts
// (conn.batching).
func (c *Conn) TakeWrite(dst []*buf.Buf) ([]*buf.Buf, TakeState) {
	c.mu.Lock()
	st := TakeFrames
	switch c.wr {
	case wrDirect:
		c.mu.Unlock()
		return dst, TakeClaimed
	case wrHandoff:
		st = TakeHandoff
	}
	k := min(len(c.q), MaxBatch)
	for _, b := range c.q[:k] {
		c.qBytes -= b.Weight()
	}
	dst = append(dst, c.q[:k]...)
	rest := copy(c.q, c.q[k:])
	clear(c.q[rest:])
	c.q = c.q[:rest]
	if len(c.q) <= softQueueFrames && c.qBytes <= softQueueBytes {
		c.fullSince = time.Time{}
	}
	if rest == 0 && cap(c.q) > ShrinkCap {
		c.q = nil // a burst is over: do not keep its slice on an idle conn
	}
	switch {
	case k > 0:
		c.wr = wrWriter
		c.batching = k > 1
	case st == TakeHandoff:
		c.wr = wrWriter
	default:
		c.wr = wrIdle
	}
	c.mu.Unlock()
	return dst, st
}

// queued reports whether frames are waiting.
func (c *Conn) Queued() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.q) > 0
}

// close marks c closed for reason (the first reason wins) and tells its
// transport, which flushes and ends gracefully or drops at once. It never
// blocks. It reports whether this call closed c.
func (c *Conn) Close(reason Reason) bool {
	return c.closeWith(reason, ReasonNone)
}

// closeUpstream closes a forwarded peer the way its holder closed the
// link (upstream: the holder's close status in the core's terms), so the
// peer sees what a direct connection would have seen.
func (c *Conn) CloseUpstream(upstream Reason) bool {
	return c.closeWith(ReasonUpstream, upstream)
}

func (c *Conn) closeWith(reason, upstream Reason) bool {
	if reason == ReasonNone {
		reason = ReasonPeerClosed
	}
	c.mu.Lock()
	if c.reason != ReasonNone {
		c.mu.Unlock()
		return false
	}
	c.reason, c.upstream = reason, upstream
	c.closing.Store(true)
	c.mu.Unlock()
	if !c.link {
		c.core.m.disconnect[reason].Inc()
	}
	c.t.Closed(reason)
	return true
}

// closeReason returns why c was closed (reasonNone while open).
func (c *Conn) CloseReason() Reason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// closeStatus returns why c was closed and the reason its transport tells
// the peer: the holder's own for a forwarded peer (reasonUpstream).
func (c *Conn) CloseStatus() (reason, told Reason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason == ReasonUpstream {
		return c.reason, c.upstream
	}
	return c.reason, c.reason
}

// releaseQueue frees whatever is still queued (after close).
func (c *Conn) ReleaseQueue() {
	c.mu.Lock()
	q := c.q
	c.q = nil
	c.qBytes = 0
	c.mu.Unlock()
	for _, b := range q {
		buf.Put(b)
	}
}
