package litenet

import (
	"encoding/binary"
	"sync"
)

// relChan is one reliable window channel, ReliableOrdered or
// ReliableUnordered (ReliableChannel.cs): its send side (a queue of
// messages, a 64-packet window of packets in flight, resends) and its
// receive side (the remote window, the ack bitmap, out-of-order packets).
// Every field is guarded by the owning Peer's mu.
type relChan struct {
	id      uint8 // channel id: the method's value
	ordered bool
	merge   bool // small messages share ReliableMerged packets (2.x; 1.x has none)

	// Send side. queue holds messages (pkt.b is the payload) and fragments
	// (pkt.b is the whole packet, sequence to fill) not yet in the window.
	queue      pktQueue
	window     *[windowSize]*pkt // in flight, by sequence % 64; nil while nothing is
	inFlight   int
	localSeq   int
	localStart int

	// Receive side.
	remoteSeq   int
	remoteStart int
	acks        uint64 // bit seq%64: seq was received (the remote window's ack bitmap)
	mustAck     bool
	held        *[windowSize]*pkt // ordered: packets ahead of remoteSeq, by seq % 64; nil while none is
	nHeld       int
	early       uint64 // unordered: bit seq%64 delivered ahead of remoteSeq
}

var windowPool = sync.Pool{New: func() any { return new([windowSize]*pkt) }}

// fill moves queued messages into the window while it has room, merging
// small ones into ReliableMerged packets as LiteNetLib 2.x does
// (GetNextOutgoingPacket): one sequence number for several messages. In
// 1.x each message takes a sequence number of its own (the window holds
// 64 messages), and the emitter still packs several into one datagram.
func (c *relChan) fill(cn uint8) {
	for c.queue.len() > 0 && relSeq(c.localSeq, c.localStart) < windowSize {
		p := c.nextPacket(cn)
		binary.LittleEndian.PutUint16(p.b[1:], uint16(c.localSeq))
		p.b[3] = c.id
		if c.window == nil {
			c.window = windowPool.Get().(*[windowSize]*pkt)
		}
		c.window[c.localSeq%windowSize] = p
		c.inFlight++
		c.localSeq = (c.localSeq + 1) % maxSequence
	}
}

// nextPacket takes the next window packet off the queue: a fragment as it
// is, else as many whole messages as fit one ReliableMerged packet (the
// merge stops 20 bytes short of the MTU once it holds one message), or a
// single message too large to merge (1,019 or 1,020 bytes), or empty
// (LiteNetLib would merge it with length 0, which its receiver takes for
// corruption, losing the rest of the container), as a plain Channeled
// packet.
func (c *relChan) nextPacket(cn uint8) *pkt {
	if c.queue.peek().seq == fragmentMark {
		p := c.queue.pop()
		p.seq = 0
		return p
	}
	var merged *pkt
	pos := 0
	for c.merge && c.queue.len() > 0 {
		m := c.queue.peek()
		if m.seq == fragmentMark || len(m.b) == 0 {
			break // an empty message cannot be merged: length 0 ends a container
		}
		next := pos + 2 + len(m.b)
		if pos > 0 && next+mergeThreshold > MaxChanneledPayload || next > MaxChanneledPayload {
			break
		}
		if merged == nil {
			merged = getPkt(MTU)
			merged.b = append(merged.b, byte(PropReliableMerged)|cn<<5, 0, 0, c.id)
		}
		merged.b = binary.LittleEndian.AppendUint16(merged.b, uint16(len(m.b)))
		merged.b = append(merged.b, m.b...)
		pos = next
		putPkt(c.queue.pop())
	}
	if merged != nil {
		return merged
	}
	m := c.queue.pop()
	p := getPkt(channeledHeader + len(m.b))
	p.b = append(p.b, byte(PropChanneled)|cn<<5, 0, 0, c.id)
	p.b = append(p.b, m.b...)
	putPkt(m)
	return p
}

// fragmentMark in a queued pkt's seq field says the pkt is a whole
// fragment packet rather than a message payload.
const fragmentMark = -1

// emitAck adds the ack packet when one is owed: 13 bytes, the remote
// window start and a bit per sequence number (seq % 64), the last byte
// unused.
func (c *relChan) emitAck(e *emitter) bool {
	if !c.mustAck {
		return true
	}
	var a [ackPacketSize]byte
	a[0] = byte(PropAck) | e.cn<<5
	binary.LittleEndian.PutUint16(a[1:], uint16(c.remoteStart))
	a[3] = c.id
	binary.LittleEndian.PutUint64(a[4:], c.acks)
	if e.add(a[:]) {
		c.mustAck = false
	}
	return !c.mustAck
}

// emit sends every window packet that was never sent or whose resend delay
// has passed, and returns when the next one falls due (0: nothing in
// flight). It stops early when the emitter is out of room.
func (c *relChan) emit(e *emitter, now, resendDelay int64) (next int64, resent int) {
	if c.inFlight == 0 {
		return 0, 0
	}
	for seq := c.localStart; seq != c.localSeq; seq = (seq + 1) % maxSequence {
		p := c.window[seq%windowSize]
		if p == nil {
			continue
		}
		due := p.sentAt + resendDelay
		if p.sent && now < due {
			next = minDeadline(next, due)
			continue
		}
		if !e.add(p.b) {
			return now, resent
		}
		if p.sent {
			resent++
		}
		p.sent, p.sentAt = true, now
		next = minDeadline(next, now+resendDelay)
	}
	return next, resent
}

// ack applies a 13-byte ack packet (ProcessAck) and reports whether it
// freed window space.
func (c *relChan) ack(b []byte) bool {
	if len(b) != ackPacketSize || c.inFlight == 0 {
		return false
	}
	ackStart := int(binary.LittleEndian.Uint16(b[1:]))
	if ackStart >= maxSequence {
		return false
	}
	if rel := relSeq(c.localStart, ackStart); rel < 0 || rel >= windowSize {
		return false // a bad or old window start
	}
	bits := binary.LittleEndian.Uint64(b[4:])
	freed := false
	for seq := c.localStart; seq != c.localSeq; seq = (seq + 1) % maxSequence {
		if relSeq(seq, ackStart) >= windowSize {
			break
		}
		i := seq % windowSize
		if bits&(1<<i) == 0 || c.window[i] == nil {
			continue
		}
		putPkt(c.window[i])
		c.window[i] = nil
		c.inFlight--
		freed = true
	}
	// The window starts at the oldest packet still in flight.
	for c.localStart != c.localSeq && c.window[c.localStart%windowSize] == nil {
		c.localStart = (c.localStart + 1) % maxSequence
	}
	if c.inFlight == 0 {
		windowPool.Put(c.window)
		c.window = nil
	}
	return freed
}

// receive takes one data packet (Channeled or ReliableMerged, header
// verified) of this channel. Deliverable messages go to rx in order;
// duplicates and packets outside the window are dropped (and still
// acknowledged when LiteNetLib would). It reports false for a packet it
// rejected as malformed or out of range.
func (c *relChan) receive(rx *rx, b []byte) bool {
	seq := int(binary.LittleEndian.Uint16(b[1:]))
	if seq >= maxSequence || relSeq(seq, c.remoteSeq) > windowSize {
		return false
	}
	relate := relSeq(seq, c.remoteStart)
	if relate < 0 || relate >= 2*windowSize {
		return false // too old (it was acknowledged long ago) or too new
	}
	if relate >= windowSize {
		start := (c.remoteStart + relate - windowSize + 1) % maxSequence
		if c.ordered && relSeq(start, c.remoteSeq) > 0 {
			// A sender with a 64-packet window never gets this far ahead of
			// an undelivered packet: refuse rather than lose it.
			return false
		}
		for c.remoteStart != start {
			c.acks &^= 1 << (c.remoteStart % windowSize)
			c.remoteStart = (c.remoteStart + 1) % maxSequence
		}
	}
	bit := uint64(1) << (seq % windowSize)
	if c.acks&bit != 0 {
		c.mustAck = true
		return true // a duplicate: acknowledged again, not delivered
	}
	switch {
	case !c.ordered && b[0]&0x80 != 0 && !rx.p.admitFragment(b):
		return true // no room for another message in reassembly: not acknowledged, sent again later
	case c.ordered && seq != c.remoteSeq && !rx.p.confirmed && c.nHeld >= unconfirmedHeld:
		return true // an unconfirmed peer may not make us hold more: sent again later
	}
	c.mustAck = true
	c.acks |= bit
	if seq == c.remoteSeq {
		rx.reliable(c, b, nil)
		c.remoteSeq = (c.remoteSeq + 1) % maxSequence
		if c.ordered {
			for c.nHeld > 0 {
				i := c.remoteSeq % windowSize
				h := c.held[i]
				if h == nil || h.seq != c.remoteSeq {
					break
				}
				c.held[i] = nil
				c.nHeld--
				rx.reliable(c, h.b, h)
				c.remoteSeq = (c.remoteSeq + 1) % maxSequence
			}
			c.releaseHeldArray()
		} else {
			for c.early&(1<<(c.remoteSeq%windowSize)) != 0 {
				c.early &^= 1 << (c.remoteSeq % windowSize)
				c.remoteSeq = (c.remoteSeq + 1) % maxSequence
			}
		}
		return true
	}
	if !c.ordered {
		c.early |= bit
		rx.reliable(c, b, nil)
		return true
	}
	h := copyPkt(b)
	if h == nil {
		return false
	}
	h.seq = seq
	if c.held == nil {
		c.held = windowPool.Get().(*[windowSize]*pkt)
	}
	i := seq % windowSize
	if old := c.held[i]; old != nil {
		putPkt(old)
		c.nHeld--
	}
	c.held[i] = h
	c.nHeld++
	return true
}

func (c *relChan) releaseHeldArray() {
	if c.nHeld == 0 && c.held != nil {
		windowPool.Put(c.held)
		c.held = nil
	}
}

// idle reports whether nothing is queued or in flight.
func (c *relChan) idle() bool { return c.queue.len() == 0 && c.inFlight == 0 }

// release frees every buffer the channel holds.
func (c *relChan) release() {
	c.queue.release()
	releaseWindow(c.window)
	releaseWindow(c.held)
	c.window, c.inFlight, c.held, c.nHeld = nil, 0, nil, 0
}

// releaseWindow frees a window array's packets and the array (nil: none).
func releaseWindow(w *[windowSize]*pkt) {
	if w == nil {
		return
	}
	for i, p := range w {
		putPkt(p)
		w[i] = nil
	}
	windowPool.Put(w)
}

// minDeadline is the earlier of two deadlines, 0 meaning none.
func minDeadline(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0 || a < b:
		return a
	}
	return b
}
