package wsframe

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// clientFrame is one client frame as a peer sends it: masked with key,
// final or not, of opcode op.
func clientFrame(op byte, fin bool, p []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var f []byte
	switch n := len(p); {
	case n < 126:
		f = []byte{b0, 0x80 | byte(n)}
	case n <= 0xffff:
		f = binary.BigEndian.AppendUint16([]byte{b0, 0x80 | 126}, uint16(n))
	default:
		f = binary.BigEndian.AppendUint64([]byte{b0, 0x80 | 127}, uint64(n))
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	f = append(f, key[:]...)
	for i, c := range p {
		f = append(f, c^key[i%4])
	}
	return f
}

// frameReaderPair is a Reader on the relay's end of a loopback TCP
// connection and the peer's end, which the test writes frames to and reads
// the relay's answers from.
func frameReaderPair(t *testing.T, limit int) (*Reader, net.Conn) {
	t.Helper()
	peer, relayEnd := wstest.TCPPair(t)
	rc := newReadConn(NewWriter(relayEnd, false), nil)
	rc.bufio()
	_ = relayEnd.SetReadDeadline(time.Now().Add(10 * time.Second)) // wall clock: a real socket's deadline
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))     // wall clock: a real socket's deadline
	return newReader(rc, limit), peer
}

func (r *Reader) mustNext(t *testing.T) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	b, reason := r.next()
	if reason != EndNone {
		t.Fatalf("next: %v", reason)
	}
	defer buf.Put(b)
	if b.Off != buf.Headroom {
		t.Fatalf("message at %d, want %d bytes of headroom", b.Off, buf.Headroom)
	}
	return append([]byte(nil), b.Frame()...)
}

func (r *Reader) mustEnd(t *testing.T, want End) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, reason := r.next(); reason != want {
		buf.Put(b)
		t.Fatalf("next: %v, want %v", reason, want)
	}
}

// expectFrame reads one unmasked server frame off the peer's end.
func expectFrame(t *testing.T, c net.Conn, op byte, payload []byte) {
	t.Helper()
	f, err := wstest.ReadRawFrame(c)
	if err != nil {
		t.Fatalf("reading the relay's answer: %v", err)
	}
	if f.Op != op || !f.Fin || f.Masked || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("relay sent op %d fin %v masked %v %x, want op %d %x", f.Op, f.Fin, f.Masked, f.Payload, op, payload)
	}
}

// TestFrameReaderMessages: binary messages of every length encoding, in
// one frame or in several with control frames between them, come out
// whole and in order; a ping is answered with its pong, a pong ignored;
// more says whether another message is already read.
func TestFrameReaderMessages(t *testing.T) {
	r, peer := frameReaderPair(t, wire.MaxMessageSize)
	pattern := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*13 + n)
		}
		return p
	}
	var stream []byte
	sizes := []int{0, 1, 125, 126, 127, 1000, wire.MaxMessageSize}
	for _, n := range sizes {
		stream = append(stream, clientFrame(opBinary, true, pattern(n))...)
	}
	// Five bytes with a 64-bit length, longer than it needs to be (what
	// coder/websocket read too).
	sizes = append(sizes, 5)
	long := binary.BigEndian.AppendUint64([]byte{0x80 | opBinary, 0x80 | 127}, 5)
	long = append(long, 0, 0, 0, 0) // a zero mask: the payload as it is
	stream = append(stream, append(long, pattern(5)...)...)
	// One message in three frames, a ping and a pong between them.
	msg := pattern(3000)
	stream = append(stream, clientFrame(opBinary, false, msg[:1000])...)
	stream = append(stream, clientFrame(opPing, true, []byte("are you there"))...)
	stream = append(stream, clientFrame(opContinuation, false, msg[1000:1001])...)
	stream = append(stream, clientFrame(opPong, true, []byte("unasked"))...)
	stream = append(stream, clientFrame(opContinuation, true, msg[1001:])...)
	go func() { _, _ = peer.Write(stream) }()
	for i, n := range sizes {
		if got := r.mustNext(t); !bytes.Equal(got, pattern(n)) {
			t.Fatalf("message %d: %d bytes, want the %d of its pattern", i, len(got), n)
		}
	}
	if got := r.mustNext(t); !bytes.Equal(got, msg) {
		t.Fatalf("fragmented message: %d bytes, want the 3000 of its pattern", len(got))
	}
	expectFrame(t, peer, opPong, []byte("are you there"))

	// more: two messages written at once, then none.
	if _, err := peer.Write(append(clientFrame(opBinary, true, []byte("a")), clientFrame(opBinary, true, []byte("b"))...)); err != nil {
		t.Fatal(err)
	}
	r.mustNext(t)
	r.mu.Lock()
	more := r.more()
	r.mu.Unlock()
	if !more {
		t.Fatal("more is false with a second message read")
	}
	r.mustNext(t)
	r.mu.Lock()
	more = r.more()
	r.mu.Unlock()
	if more {
		t.Fatal("more is true with nothing left")
	}
}

// TestFrameReaderEnds: what ends a connection, and what the relay says.
func TestFrameReaderEnds(t *testing.T) {
	unmasked := clientFrame(opBinary, true, []byte("x"))
	unmasked[1] &^= 0x80
	rsv := clientFrame(opBinary, true, []byte("x"))
	rsv[0] |= 0x40
	huge := []byte{0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}
	protocolError := binary.BigEndian.AppendUint16(nil, uint16(websocket.StatusProtocolError))
	for _, tc := range []struct {
		name   string
		stream []byte
		want   End
		answer []byte // the relay's close frame payload (nil: none)
	}{
		{"text", clientFrame(opText, true, []byte("hi")), EndUnsupported, nil},
		{"too big", clientFrame(opBinary, true, make([]byte, 1001)), EndTooBig,
			append(binary.BigEndian.AppendUint16(nil, uint16(websocket.StatusMessageTooBig)), "message too big"...)},
		{"too big in fragments", append(clientFrame(opBinary, false, make([]byte, 600)), clientFrame(opContinuation, true, make([]byte, 401))...),
			EndTooBig, append(binary.BigEndian.AppendUint16(nil, uint16(websocket.StatusMessageTooBig)), "message too big"...)},
		{"unmasked", unmasked, EndClosed, protocolError},
		{"reserved bits", rsv, EndClosed, protocolError},
		{"length with its top bit", huge, EndClosed, protocolError},
		{"reserved opcode", clientFrame(0x3, true, nil), EndClosed, protocolError},
		{"reserved control opcode", clientFrame(0xb, true, nil), EndClosed, protocolError},
		{"continuation of nothing", clientFrame(opContinuation, true, []byte("x")), EndClosed, protocolError},
		{"data inside a fragmented message", append(clientFrame(opBinary, false, []byte("x")), clientFrame(opBinary, true, []byte("y"))...),
			EndClosed, protocolError},
		{"fragmented ping", clientFrame(opPing, false, nil), EndClosed, protocolError},
		{"long ping", clientFrame(opPing, true, make([]byte, 126)), EndClosed, protocolError},
		{"close with one byte", clientFrame(opClose, true, []byte{3}), EndClosed, protocolError},
		{"close with a code for no frame", clientFrame(opClose, true, binary.BigEndian.AppendUint16(nil, 1005)), EndClosed, protocolError},
		{"close with a reserved code", clientFrame(opClose, true, binary.BigEndian.AppendUint16(nil, 1004)), EndClosed, protocolError},
		{"close with a code under 1000", clientFrame(opClose, true, binary.BigEndian.AppendUint16(nil, 999)), EndClosed, protocolError},
		{"close with a code past 4999", clientFrame(opClose, true, binary.BigEndian.AppendUint16(nil, 5000)), EndClosed, protocolError},
		{"close with a reason not UTF-8", clientFrame(opClose, true, append(binary.BigEndian.AppendUint16(nil, 1000), 0xff, 0xfe)),
			EndClosed, protocolError},
		{"close of an application", clientFrame(opClose, true, append(binary.BigEndian.AppendUint16(nil, 4000), "done, thanks"...)),
			EndClosed, binary.BigEndian.AppendUint16(nil, 4000)},
		{"close", clientFrame(opClose, true, append(binary.BigEndian.AppendUint16(nil, 1001), "bye"...)), EndClosed,
			binary.BigEndian.AppendUint16(nil, 1001)},
		{"empty close", clientFrame(opClose, true, nil), EndClosed, []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, peer := frameReaderPair(t, 1000)
			go func() { _, _ = peer.Write(tc.stream) }()
			r.mustEnd(t, tc.want)
			if tc.answer != nil {
				expectFrame(t, peer, opClose, tc.answer)
			}
			r.mustEnd(t, EndClosed) // and nothing more is read
		})
	}
	t.Run("the peer gone", func(t *testing.T) {
		r, peer := frameReaderPair(t, 1000)
		_, _ = peer.Write(clientFrame(opBinary, false, []byte("half")))
		peer.Close()
		r.mustEnd(t, EndClosed)
	})
}

// TestFrameReaderAwaitsTheClose: after the relay's close frame, what the
// peer still sends is read and dropped up to its close frame (the rest of
// a text frame refused unread first), and no ping is answered.
func TestFrameReaderAwaitsTheClose(t *testing.T) {
	r, peer := frameReaderPair(t, 1000)
	go func() {
		_, _ = peer.Write(clientFrame(opText, true, bytes.Repeat([]byte("t"), 5000)))
	}()
	r.mustEnd(t, EndUnsupported)
	code, text := uint16(websocket.StatusUnsupportedData), "binary messages only"
	if err := r.rc.Writer.WriteClose(code, text, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	expectFrame(t, peer, opClose, append(binary.BigEndian.AppendUint16(nil, uint16(code)), text...))
	go func() {
		var s []byte
		s = append(s, clientFrame(opBinary, true, make([]byte, 2000))...)
		s = append(s, clientFrame(opPing, true, []byte("p"))...)
		s = append(s, clientFrame(opClose, true, binary.BigEndian.AppendUint16(nil, uint16(code)))...)
		s = append(s, clientFrame(opBinary, true, []byte("after the close"))...)
		_, _ = peer.Write(s)
	}()
	r.AwaitClose()
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if !closed {
		t.Fatal("AwaitClose returned before the peer's close")
	}
	// Nothing was answered: the relay's close was the last frame it sent.
	r.rc.Writer.Conn.Close()
	if rest, err := io.ReadAll(peer); len(rest) != 0 {
		t.Fatalf("the relay sent %d more bytes (%v) after its close", len(rest), err)
	}
}

// TestFrameReaderAllocatesNothing: reading game-sized messages, one frame
// each, costs no allocation.
func TestFrameReaderAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	r, peer := frameReaderPair(t, wire.MaxMessageSize)
	frame := clientFrame(opBinary, true, make([]byte, 100))
	const runs = 1000
	go func() {
		for range runs + 1 {
			if _, err := peer.Write(frame); err != nil {
				return
			}
		}
	}()
	allocs := testing.AllocsPerRun(runs, func() {
		r.mu.Lock()
		b, reason := r.next()
		r.mu.Unlock()
		if reason != EndNone || b.Len() != 100 {
			t.Fatalf("next: %v", reason)
		}
		buf.Put(b)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per message, want 0", allocs)
	}
}

// cyclicConn is a peer that sends frame over and over, as fast as it is
// read (what a benchmark of a reader needs: no socket in the way).
type cyclicConn struct {
	streamConn
	frame []byte
	off   int
}

func (c *cyclicConn) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], c.frame[c.off:])
		c.off = (c.off + k) % len(c.frame)
		n += k
	}
	return n, nil
}

// BenchmarkFrameReader: one game-sized binary message a frame, read by
// the relay's Reader and, for comparison, by coder/websocket as the
// relay read it before (wsRead), from the same endless stream without a
// socket.
func BenchmarkFrameReader(b *testing.B) {
	for _, size := range []int{100, 1024} {
		frame := clientFrame(opBinary, true, make([]byte, size))
		b.Run(fmt.Sprintf("relay/%d", size), func(b *testing.B) {
			rc := newReadConn(NewWriter(&cyclicConn{frame: frame}, false), nil)
			rc.bufio()
			r := newReader(rc, wire.MaxMessageSize)
			r.stall = 10 * time.Second // as the relay reads: the stall bound armed only when a read would wait
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				r.mu.Lock()
				m, reason := r.next()
				r.mu.Unlock()
				if reason != EndNone {
					b.Fatal(reason)
				}
				buf.Put(m)
			}
		})
		b.Run(fmt.Sprintf("coder/%d", size), func(b *testing.B) {
			ws := acceptOver(b, &cyclicConn{frame: frame})
			defer ws.CloseNow()
			ws.SetReadLimit(wire.MaxMessageSize)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				m, reason := wsRead(ctx, ws)
				if reason != EndNone {
					b.Fatal(reason)
				}
				buf.Put(m)
			}
		})
	}
}
