// Package buf is the relay's message buffers: pooled, in a few size
// classes, each with Headroom bytes free in front of the message so that
// the routing core can prepend a header in place.
//
// A Buf has exactly one owner at a time, which hands it on whole: the
// reader that filled it, then the queue of the connection it was routed
// to, then that connection's writer, which puts it back after the write.
// Nothing holds a Buf while a connection is idle.
package buf

import (
	"errors"
	"io"
	"sync"

	"github.com/purrfly/purrfly/wire"
)

// Headroom is the space kept free in front of every read message so that
// the routing core can prepend the relay -> host header [2][sender:4] in
// place, without copying the payload.
const Headroom = 5

// MaxSize is the largest pooled buffer: the biggest legal message plus
// headroom plus the bytes a reader takes past its limit to tell an
// oversize message.
const MaxSize = wire.MaxMessageSize + Headroom + 2

// sizeClasses are the pooled buffer sizes.
var sizeClasses = [...]int{512, 4096, 16384, MaxSize}

// Buf is one message buffer: the frame is B[Off:End].
type Buf struct {
	B     []byte // len(B) is its class's size; static after creation
	Off   int
	End   int
	class int // -1: not pooled (Unpooled)
	// Method is the delivery method the frame came with and is sent with
	// to a UDP peer (ReliableOrdered for everything but game data a UDP
	// peer sent).
	Method wire.Delivery
	// Cut is how many bytes of framing the transport took out of the
	// message before routing it (a UDP packet's delivery method, CutAt):
	// PurrLay's size rule for client packets counts the packet as sent.
	Cut int
}

var pools [len(sizeClasses)]sync.Pool

func init() {
	for i := range pools {
		size, class := sizeClasses[i], i
		pools[i].New = func() any { return &Buf{B: make([]byte, size), class: class} }
	}
}

// Get returns a buffer whose capacity holds at least n bytes (at most
// MaxSize), its frame empty at offset 0.
func Get(n int) *Buf {
	for i, size := range sizeClasses {
		if n <= size {
			return getClass(i)
		}
	}
	return getClass(len(sizeClasses) - 1)
}

func getClass(i int) *Buf {
	b := pools[i].Get().(*Buf)
	b.Off, b.End, b.Method, b.Cut = 0, 0, wire.ReliableOrdered, 0
	return b
}

// Unpooled returns a buffer of n bytes that no pool takes back: for
// frames longer than any message (tests of the writers).
func Unpooled(n int) *Buf {
	return &Buf{B: make([]byte, n), class: -1, Method: wire.ReliableOrdered}
}

// Put returns b to its pool. b must not be used afterwards. Put(nil) does
// nothing.
func Put(b *Buf) {
	if b == nil || b.class < 0 {
		return
	}
	pools[b.class].Put(b)
}

// Release puts a batch's frames back and clears its slots (the slice is
// the caller's to reuse).
func Release(batch []*Buf) {
	for i, b := range batch {
		Put(b)
		batch[i] = nil
	}
}

// Of returns a pooled buffer holding exactly p (small control frames).
func Of(p ...byte) *Buf {
	b := Get(len(p))
	b.End = copy(b.B, p)
	return b
}

// Frame is the bytes to send or route.
func (b *Buf) Frame() []byte { return b.B[b.Off:b.End] }

// Len is the frame's length.
func (b *Buf) Len() int { return b.End - b.Off }

// Weight is the memory b pins while queued: its whole buffer, whatever the
// frame's length (a 16,385-byte frame holds a 65,542-byte buffer). Queue
// bounds count this.
func (b *Buf) Weight() int { return len(b.B) }

// CutAt takes byte i of the frame out, moving the bytes before it up by
// one (a UDP packet's delivery method, wire.UDPMethod).
func (b *Buf) CutAt(i int) {
	copy(b.B[b.Off+1:b.Off+1+i], b.B[b.Off:b.Off+i])
	b.Off++
	b.Cut++
}

// ErrTooBig is a message longer than the largest buffer, or than the
// limit its reader was given.
var ErrTooBig = errors.New("message larger than 65,535 bytes")

// ReadInto reads one message of at most limit bytes into a pooled buffer,
// leaving head bytes free in front. It starts with the smallest class and
// moves up only when the message does not fit, so small game packets never
// touch a 64 KiB buffer. The caller owns the result.
func ReadInto(r io.Reader, head, limit int) (*Buf, error) {
	b := getClass(0)
	pos := head
	for {
		if pos == len(b.B) {
			if b.class == len(sizeClasses)-1 {
				Put(b)
				return nil, ErrTooBig
			}
			nb := getClass(b.class + 1)
			copy(nb.B, b.B[:pos])
			Put(b)
			b = nb
		}
		n, err := r.Read(b.B[pos:])
		pos += n
		if err == io.EOF {
			if pos-head > limit {
				Put(b)
				return nil, ErrTooBig
			}
			b.Off, b.End = head, pos
			return b, nil
		}
		if err != nil {
			Put(b)
			return nil, err
		}
	}
}
