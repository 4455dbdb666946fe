package litenet

import "encoding/binary"

// seqChan is a Sequenced channel (unreliable: only newer packets are
// delivered) or, reliable, a ReliableSequenced one: the last packet sent is
// resent until the peer acknowledges its sequence number with a 4-byte ack
// (SequencedChannel.cs). Sequence numbers start at 1. Every field is
// guarded by the owning Peer's mu.
type seqChan struct {
	id       uint8
	reliable bool

	queue      pktQueue // message payloads not yet sent
	localSeq   int
	last       *pkt // reliable: the last packet sent, until acknowledged
	lastSeq    int
	remoteSeq  int
	mustAck    bool
	lastSentAt int64
}

// emit sends the queued messages, each with the next sequence number, and
// (reliable) resends the last unacknowledged one when its delay has passed
// and nothing newer is queued. It returns when the last packet's resend
// falls due (0: none).
func (c *seqChan) emit(e *emitter, now, resendDelay int64) (next int64, resent int) {
	if c.reliable && c.queue.len() == 0 && c.last != nil && now >= c.lastSentAt+resendDelay {
		if e.add(c.last.b) {
			c.lastSentAt = now
			resent++
		}
	}
	for c.queue.len() > 0 {
		m := c.queue.peek()
		var p [channeledHeader]byte
		seq := (c.localSeq + 1) % maxSequence
		p[0] = byte(PropChanneled) | e.cn<<5
		binary.LittleEndian.PutUint16(p[1:], uint16(seq))
		p[3] = c.id
		if !e.add2(p[:], m.b) {
			break
		}
		c.localSeq = seq
		c.queue.pop()
		if c.reliable && c.queue.len() == 0 {
			// Kept for resending: the packet as sent.
			putPkt(c.last)
			c.last = getPkt(channeledHeader + len(m.b))
			c.last.b = append(append(c.last.b, p[:]...), m.b...)
			c.lastSeq, c.lastSentAt = seq, now
		}
		putPkt(m)
	}
	if c.last != nil {
		next = c.lastSentAt + resendDelay
	}
	return next, resent
}

// ack applies a ReliableSequenced ack: the last packet is done once the
// peer names its sequence number.
func (c *seqChan) ack(b []byte) {
	if c.reliable && c.last != nil && int(binary.LittleEndian.Uint16(b[1:])) == c.lastSeq {
		putPkt(c.last)
		c.last = nil
	}
}

// receive delivers a data packet only when it is newer than the last one
// delivered; fragmented packets are dropped, as LiteNetLib drops them.
func (c *seqChan) receive(rx *rx, b []byte) bool {
	if b[0]&0x80 != 0 {
		return false
	}
	seq := int(binary.LittleEndian.Uint16(b[1:]))
	if c.reliable {
		c.mustAck = true
	}
	if seq >= maxSequence || relSeq(seq, c.remoteSeq) <= 0 {
		return true // old or repeated: not delivered (a reliable one is acknowledged again)
	}
	c.remoteSeq = seq
	rx.deliver(Method(c.id), b[channeledHeader:], nil)
	return true
}

func (c *seqChan) idle() bool { return c.queue.len() == 0 && c.last == nil }

func (c *seqChan) release() {
	c.queue.release()
	putPkt(c.last)
	c.last = nil
}

// emitAck sends the 4-byte ack of the last sequence received, when owed.
func (c *seqChan) emitAck(e *emitter) bool {
	if !c.mustAck {
		return true
	}
	var a [seqAckSize]byte
	a[0] = byte(PropAck) | e.cn<<5
	binary.LittleEndian.PutUint16(a[1:], uint16(c.remoteSeq))
	a[3] = c.id
	if e.add(a[:]) {
		c.mustAck = false
	}
	return !c.mustAck
}
