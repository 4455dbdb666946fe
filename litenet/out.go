package litenet

import (
	"encoding/binary"
	"net/netip"
)

// Outgoing datagrams. A flush packs what each peer has to send into as few
// datagrams as the MTU allows (Merged: [0x0D]([u16 size][packet])*, a lone
// packet sent bare, as LiteNetLib's SendUserData/SendMerged do), into one
// socket-wide batch written with one sendmmsg (send_linux.go; one write
// each elsewhere) for every peer flushed together.

// batchSize is the datagrams a socket's batch holds; peerBudget the most
// one peer may add in one flush (what is left waits for the next).
const (
	batchSize  = 256
	peerBudget = 96
)

// outBatch is a socket's batch of datagrams. Guarded by the socket's
// flushMu: only the goroutine holding it builds and writes.
type outBatch struct {
	w     batchWriter
	bufs  [][]byte         // len batchSize: the datagrams, slices of arena
	addrs []netip.AddrPort // len batchSize: where each goes
	arena []byte           // batchSize * MaxPacketSize
	n     int              // datagrams ready
	sent  uint64           // datagrams written (stats)
	errs  uint64
}

// batchWriter writes datagrams, bufs[i] to addrs[i], and says how many of
// the first it wrote (send_linux.go, send_other.go).
type batchWriter interface {
	write(bufs [][]byte, addrs []netip.AddrPort) (int, error)
}

func newOutBatch(w batchWriter) *outBatch {
	return &outBatch{
		w:     w,
		bufs:  make([][]byte, batchSize),
		addrs: make([]netip.AddrPort, batchSize),
		arena: make([]byte, batchSize*MaxPacketSize),
	}
}

func (o *outBatch) free() int { return batchSize - o.n }

// slot is the empty buffer of the next datagram.
func (o *outBatch) slot() []byte {
	return o.arena[o.n*MaxPacketSize : o.n*MaxPacketSize : (o.n+1)*MaxPacketSize]
}

// commit makes d (a slice of slot()) the next datagram, for addr.
func (o *outBatch) commit(d []byte, addr netip.AddrPort) {
	o.bufs[o.n] = d
	o.addrs[o.n] = addr
	o.n++
}

// write sends every ready datagram and empties the batch. A send error
// (a full socket buffer that stays full, an unreachable peer) loses the
// rest of the batch: UDP may lose datagrams, and the reliable channels
// resend.
func (o *outBatch) write() {
	for off := 0; off < o.n; {
		k, err := o.w.write(o.bufs[off:o.n], o.addrs[off:o.n])
		if err != nil || k <= 0 {
			o.errs += uint64(o.n - off)
			break
		}
		off += k
		o.sent += uint64(k)
	}
	clear(o.bufs[:o.n])
	o.n = 0
}

// emitter packs one peer's packets into the batch during a flush.
type emitter struct {
	o      *outBatch
	addr   netip.AddrPort
	cn     uint8
	v1     bool // renumber every packet for LiteNetLib 1.x (version.go)
	budget int
	cur    []byte // the open Merged datagram, header byte first; nil if none
	count  int    // packets in cur
	added  int    // packets added in this flush
	// credit: what an unproven peer may still be sent (reflect.go), in
	// datagrams and bytes; a Merged datagram is charged as if it stays
	// merged (3 bytes more than bare). starved: a packet was held back
	// for want of it.
	credit  credit
	starved bool
}

func (e *emitter) start(o *outBatch, addr netip.AddrPort, cn uint8, v1 bool) {
	*e = emitter{o: o, addr: addr, cn: cn, v1: v1, budget: min(peerBudget, o.free()), credit: unlimited}
}

// afford charges a new datagram of n bytes (dgram) or n more bytes of
// the open one to the credit, or reports that it cannot.
func (e *emitter) afford(dgram bool, n int) bool {
	c := &e.credit
	if (dgram && c.dgrams < 1) || c.bytes < n {
		e.starved = true
		return false
	}
	if dgram {
		c.dgrams--
	}
	c.bytes -= n
	return true
}

// renumber turns the packet starting at d[i] into 1.x numbering when the
// peer speaks 1.x.
func (e *emitter) renumber(d []byte, i int) {
	if e.v1 {
		d[i] = toV1(d[i])
	}
}

// add appends one whole packet; false when the peer's budget or the batch
// is used up (the packet was not added).
func (e *emitter) add(p []byte) bool { return e.add2(p, nil) }

// add2 appends the packet made of head and tail.
func (e *emitter) add2(head, tail []byte) bool {
	n := len(head) + len(tail)
	if 1+2+n+mergeThreshold >= MTU {
		// Too large to merge: a datagram of its own.
		e.close()
		if e.budget == 0 || !e.afford(true, n) {
			return false
		}
		d := append(append(e.o.slot(), head...), tail...)
		e.renumber(d, 0)
		e.o.commit(d, e.addr)
		e.budget--
		e.added++
		return true
	}
	if e.cur != nil && len(e.cur)+2+n > MTU {
		e.close()
	}
	if e.cur == nil {
		if e.budget == 0 || !e.afford(true, 3+n) {
			return false
		}
		e.cur = append(e.o.slot(), byte(PropMerged)|e.cn<<5)
		e.renumber(e.cur, 0)
	} else if !e.afford(false, 2+n) {
		return false
	}
	e.cur = binary.LittleEndian.AppendUint16(e.cur, uint16(n))
	at := len(e.cur)
	e.cur = append(append(e.cur, head...), tail...)
	e.renumber(e.cur, at)
	e.count++
	e.added++
	return true
}

// addAlone appends p as a datagram of its own, after the open Merged one:
// LiteNetLib reads a Disconnect only as a whole datagram (its NetManager
// does; inside a Merged one its NetPeer, like Peer.packet, ignores it).
func (e *emitter) addAlone(p []byte) bool {
	e.close()
	if e.budget == 0 || !e.afford(true, len(p)) {
		return false
	}
	d := append(e.o.slot(), p...)
	e.renumber(d, 0)
	e.o.commit(d, e.addr)
	e.budget--
	e.added++
	return true
}

// close commits the open Merged datagram: bare when it holds one packet.
func (e *emitter) close() {
	if e.cur == nil {
		return
	}
	d := e.cur
	if e.count == 1 {
		d = d[3:]
	}
	e.o.commit(d, e.addr)
	e.budget--
	e.cur, e.count = nil, 0
}
