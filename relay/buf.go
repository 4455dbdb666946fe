package relay

import (
	"io"
	"sync"

	"github.com/purrfly/purrfly/wire"
)

// headroom is the space kept free in front of every read message so that the
// routing core can prepend the relay -> host header [2][sender:4] in place,
// without copying the payload.
const headroom = 5

// sizeClasses are the pooled buffer sizes. The largest holds the biggest
// legal message plus headroom plus the bytes coder/websocket reads past
// its limit to detect an oversize message.
var sizeClasses = [...]int{512, 4096, 16384, wire.MaxMessageSize + headroom + 2}

// buf is one pooled frame buffer. It has exactly one owner at a time: the
// reader that filled it, then the queue of the connection it was routed to,
// then that connection's writer, which returns it to the pool after the
// write. Nothing keeps a buf while a connection is idle.
type buf struct {
	b     []byte // len(b) == sizeClasses[class]; static after creation
	off   int    // frame is b[off:end]
	end   int
	class int
	// method is the delivery method the frame came with and is sent with
	// to a UDP peer (ReliableOrdered for everything but game data a UDP
	// peer sent).
	method wire.Delivery
	// cut is how many bytes of framing the transport took out of the
	// message before routing it (a UDP packet's delivery method, cutAt):
	// PurrLay's size rule for client packets counts the packet as sent.
	cut int
}

var bufPools [len(sizeClasses)]sync.Pool

func init() {
	for i := range bufPools {
		size, class := sizeClasses[i], i
		bufPools[i].New = func() any { return &buf{b: make([]byte, size), class: class} }
	}
}

// getBuf returns a buffer whose capacity holds at least n bytes.
func getBuf(n int) *buf {
	for i, size := range sizeClasses {
		if n <= size {
			return getClass(i)
		}
	}
	return getClass(len(sizeClasses) - 1)
}

func getClass(i int) *buf {
	b := bufPools[i].Get().(*buf)
	b.off, b.end, b.method, b.cut = 0, 0, wire.ReliableOrdered, 0
	return b
}

// putBuf returns b to its pool. b must not be used afterwards.
func putBuf(b *buf) {
	if b == nil {
		return
	}
	bufPools[b.class].Put(b)
}

// release returns a batch's frames to their pools and clears its slots
// (the slice is the caller's to reuse).
func release(batch []*buf) {
	for i, b := range batch {
		putBuf(b)
		batch[i] = nil
	}
}

// frame is the bytes to send or route.
func (b *buf) frame() []byte { return b.b[b.off:b.end] }

// cutAt takes byte i of the frame out, moving the bytes before it up by
// one (a UDP packet's delivery method, wire.UDPMethod).
func (b *buf) cutAt(i int) {
	copy(b.b[b.off+1:b.off+1+i], b.b[b.off:b.off+i])
	b.off++
	b.cut++
}

// len is the frame's length.
func (b *buf) len() int { return b.end - b.off }

// weight is the memory b pins while queued: its whole buffer, whatever the
// frame's length (a 16,385-byte frame holds a 65,542-byte buffer). Queue
// bounds count this.
func (b *buf) weight() int { return len(b.b) }

// newFrame returns a pooled buffer holding exactly p (small control frames).
func newFrame(p ...byte) *buf {
	b := getBuf(len(p))
	b.end = copy(b.b, p)
	return b
}

// readInto reads one message of at most limit bytes into a pooled buffer,
// leaving head bytes free in front (a client's message read by coder/websocket; a
// link's frames from a holder machine need no headroom but may be five
// bytes longer than a message, as [2][sender:4][payload] is).
func readInto(r io.Reader, head, limit int) (*buf, error) {
	b := getClass(0)
	pos := head
	for {
		if pos == len(b.b) {
			if b.class == len(sizeClasses)-1 {
				putBuf(b)
				return nil, errMessageTooBig
			}
			nb := getClass(b.class + 1)
			copy(nb.b, b.b[:pos])
			putBuf(b)
			b = nb
		}
		n, err := r.Read(b.b[pos:])
		pos += n
		if err == io.EOF {
			if pos-head > limit {
				putBuf(b)
				return nil, errMessageTooBig
			}
			b.off, b.end = head, pos
			return b, nil
		}
		if err != nil {
			putBuf(b)
			return nil, err
		}
	}
}
