package litenet

import "sync"

// pkt is one pooled packet or message buffer. It has one owner at a time:
// a channel's queue or window, a held (out-of-order) slot, a fragment
// group, or a delivery in flight.
type pkt struct {
	b      []byte // the bytes; cap(b) is the class size
	class  int8
	sent   bool  // a window packet went out at least once
	sentAt int64 // when it last went out (Endpoint time)
	seq    int   // a held packet's sequence number (receive side)
}

// pktClasses are the buffer sizes: small game messages, a whole packet, and
// reassembled messages.
var pktClasses = [...]int{128, 512, MaxPacketSize + 68, 16 << 10, 80 << 10}

var pktPools [len(pktClasses)]sync.Pool

func init() {
	for i := range pktPools {
		size, class := pktClasses[i], int8(i)
		pktPools[i].New = func() any { return &pkt{b: make([]byte, 0, size), class: class} }
	}
}

// getPkt returns an empty packet buffer holding at least n bytes, or nil
// when n is larger than the largest class.
func getPkt(n int) *pkt {
	for i, size := range pktClasses {
		if n <= size {
			p := pktPools[i].Get().(*pkt)
			p.b = p.b[:0]
			p.sent, p.sentAt, p.seq = false, 0, 0
			return p
		}
	}
	return nil
}

// pktClassSize is the capacity of the buffer getPkt(n) returns.
func pktClassSize(n int) int {
	for _, size := range pktClasses {
		if n <= size {
			return size
		}
	}
	return n
}

// copyPkt returns a pooled copy of b.
func copyPkt(b []byte) *pkt {
	p := getPkt(len(b))
	if p == nil {
		return nil
	}
	p.b = append(p.b, b...)
	return p
}

// putPkt returns p to its pool; p must not be used afterwards.
func putPkt(p *pkt) {
	if p != nil {
		pktPools[p.class].Put(p)
	}
}

// pktQueue is a FIFO of packets that reuses its backing array.
type pktQueue struct {
	q    []*pkt
	head int
}

func (q *pktQueue) len() int { return len(q.q) - q.head }

func (q *pktQueue) push(p *pkt) {
	if q.head > 0 && q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
	}
	q.q = append(q.q, p)
}

func (q *pktQueue) peek() *pkt { return q.q[q.head] }

func (q *pktQueue) pop() *pkt {
	p := q.q[q.head]
	q.q[q.head] = nil
	q.head++
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
		if cap(q.q) > 256 {
			q.q = nil // a burst is over: an idle peer keeps no big slice
		}
	}
	return p
}

// release frees every queued packet.
func (q *pktQueue) release() {
	for i := q.head; i < len(q.q); i++ {
		putPkt(q.q[i])
		q.q[i] = nil
	}
	q.q, q.head = nil, 0
}
