package core

import (
	"slices"
	"time"

	"github.com/purrfly/purrfly/relay/internal/buf"
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
	// MaxBatch bounds the frames a writer takes at once, so that the queue
	// length stays an honest measure of the backlog.
	MaxBatch  = 64
	ShrinkCap = 256
)

// The write side of a connection with a direct writer has one owner at a
// time, recorded in Conn.wr under Conn.mu:
//
//	wrIdle --Offer claims--> wrDirect --whole, or nothing written (frame requeued)--> wrIdle
//	                            \--part written: the rest and the socket to the writer--> wrHandoff --TakeWrite--> wrWriter
//	wrIdle --TakeWrite finds frames--> wrWriter --TakeWrite finds none--> wrIdle
//
// A frame queued while the write side is owned waits for its owner: after
// the one claimed, after the rest of a handed-off frame, in order.

// writeState is who owns a connection's data frames on its socket.
type writeState uint8

const (
	wrIdle    writeState = iota // nobody: the writer is parked, or about to look at the queue
	wrWriter                    // the writer, from taking frames until it finds none
	wrDirect                    // a sender, for the one frame it claimed (Conn.Send)
	wrHandoff                   // the writer, from the end of a direct write that left part of its frame
)

// DirectWriter is a transport's socket that a sender may write one frame
// to itself (a WebSocket on a plain socket, package wstransport).
type DirectWriter interface {
	// WriteDirect writes b as one frame without blocking. It releases b,
	// except for directAgain (nothing was written: b is the caller's).
	// For directPartial the frame's rest and the socket are left for the
	// writer (TakeWrite reports TakeHandoff; the transport's writer
	// finishes or drops them).
	WriteDirect(b *buf.Buf) DirectResult
	// MaxDirect is the longest frame writeDirect takes; longer ones are
	// queued.
	MaxDirect() int
}

// DirectResult is how a direct write went.
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

// Enqueue hands b to c's writer. It never blocks and never does I/O, so it
// may be called with a room lock held. It takes ownership of b and reports
// whether b was queued: b is dropped only when c is already closing or
// when queuing it would pass the hard bound (which closes c).
func (c *Conn) Enqueue(b *buf.Buf, dir int) bool {
	_, ok := c.Offer(b, dir, false)
	return ok
}

// Send is Enqueue for a reader that may write b itself (direct: its own
// input has nothing more buffered, conn.direct). When c's transport takes
// direct writes, its writer is idle with nothing queued and frames to c
// are not coming in bursts (Conn.batching), Send claims c's socket for b
// instead of queueing it: b's place in c's order is fixed by the claim
// (made under c.mu, inside the caller's room lock), and nothing else is
// written to c until the claim ends. The caller must call write on the
// result once it holds no lock; for a queued (or dropped) frame write does
// nothing. Like Enqueue it never blocks and takes ownership of b.
func (c *Conn) Send(b *buf.Buf, dir int, direct bool) Claim {
	cl, _ := c.Offer(b, dir, direct)
	return cl
}

// Offer is Enqueue and Send: it claims c's socket for b (direct allowed
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

// Claim is a frame a sender claimed c's socket for (Conn.Send); the zero
// claim is a frame that was queued or dropped.
type Claim struct {
	c *Conn
	b *buf.Buf
}

// Write writes a claimed frame to its connection's socket without
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

// TakeBatch moves up to maxBatch frames from the front of the queue to dst
// (the writer's own slice). Once the backlog is back under the soft bound
// the slow-receiver clock stops. A transport without direct writes (UDP)
// only ever needs this.
func (c *Conn) TakeBatch(dst []*buf.Buf) []*buf.Buf {
	dst, _ = c.TakeWrite(dst)
	return dst
}

// TakeState is what TakeWrite found of c's write side besides the frames.
type TakeState uint8

const (
	TakeFrames  TakeState = iota // the frames taken (none: the writer is idle and may park)
	TakeClaimed                  // a direct write is in flight: nothing taken; its end wakes the writer
	TakeHandoff                  // a direct write left the rest of its frame: finish it before the frames
)

// TakeWrite is the writer's TakeBatch. While frames are taken (or a
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

// Queued reports whether frames are waiting.
func (c *Conn) Queued() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.q) > 0
}

// ReleaseQueue frees whatever is still queued (after close).
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
