package wsframe

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/buf"
)

// cappedPair is a loopback connection whose relay end (a direct Writer)
// can hold about 16 KiB in flight toward a peer that does not read until
// the test reads from br: the peer's receive buffer is capped before it
// connects (the window it offers is fixed then), the relay's send buffer
// after.
func cappedPair(t *testing.T) (*Writer, net.Conn, *bufio.Reader) {
	t.Helper()
	if !canCapSocketBuffers || !DirectWrites() {
		t.Skip("needs capped socket buffers and direct writes")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		return capSocketBuffer(c, soRcvBuf, 4<<10)
	}}
	peer, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	relayEnd, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relayEnd.Close() })
	sc, err := relayEnd.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := capSocketBuffer(sc, soSndBuf, 4<<10); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(relayEnd, false)
	if !w.Direct() {
		t.Fatal("a loopback TCP socket takes no direct writes")
	}
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second)) // wall clock: a real socket's deadline
	return w, peer, bufio.NewReader(peer)
}

// frameOf is a pooled frame of n bytes of tag.
func frameOf(tag byte, n int) *buf.Buf {
	b := buf.Get(n)
	for i := range n {
		b.B[i] = tag
	}
	b.End = n
	return b
}

// fillToPartial writes frames of MaxDirect bytes directly until the socket
// takes one only in part, and returns the tags of the frames written (the
// last in part), the Rest, and the peer's reader of them. When the socket
// takes nothing of a frame, the peer reads a little to make room.
func fillToPartial(t *testing.T, w *Writer, br *bufio.Reader) ([]byte, Rest, io.Reader) {
	t.Helper()
	var tags, early []byte
	tag := byte('a')
	for range 64 {
		b := frameOf(tag, MaxDirect)
		res, rest := w.WriteDirect(b)
		switch res {
		case DirectWhole:
			tags = append(tags, tag)
			tag++
		case DirectPartial:
			if !rest.Held() {
				t.Fatal("a partial write handed on no Rest")
			}
			return append(tags, tag), rest, io.MultiReader(bytes.NewReader(early), br)
		case DirectAgain:
			buf.Put(b)
			p := make([]byte, 3000)
			n, err := br.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			early = append(early, p[:n]...)
		default:
			t.Fatalf("frame %c: result %d", tag, res)
		}
	}
	t.Fatal("no partial write in 64 attempts")
	return nil, Rest{}, nil
}

// waitingInWriteControl reports whether a goroutine waits for the socket
// in WriteControl.
func waitingInWriteControl() bool {
	sb := make([]byte, 1<<20)
	for _, g := range strings.Split(string(sb[:runtime.Stack(sb, true)]), "\n\n") {
		if strings.Contains(g, "wsframe.(*Writer).WriteControl(") && strings.Contains(g, "sync.(*Mutex).Lock(") {
			return true
		}
	}
	return false
}

// TestRestKeepsTheSocket: a direct write the socket takes only in part
// hands the socket on with the frame's rest. Until the Rest is finished,
// on another goroutine here as the connection's writer does, another
// sender's direct write is refused (DirectAgain, its frame still its own)
// and a control frame waits; the peer then reads every frame whole, the
// pong after the frame that was in transit.
func TestRestKeepsTheSocket(t *testing.T) {
	w, _, br0 := cappedPair(t)
	tags, rest, br := fillToPartial(t, w, br0)
	other := frameOf('z', 10)
	if res, r := w.WriteDirect(other); res != DirectAgain || r.Held() {
		t.Fatalf("a direct write while the Rest travels: %d", res)
	}
	buf.Put(other)
	pong := make(chan error, 1)
	go func() { pong <- w.WriteControl([]byte{0x80 | opPong, 1, 'p'}, time.Now().Add(10*time.Second)) }() // wall clock: a real socket's deadline
	for !waitingInWriteControl() {
		runtime.Gosched()
	}
	finished := make(chan error, 1)
	go func() { finished <- rest.Finish(time.Now().Add(10 * time.Second)) }() // wall clock: a real socket's deadline
	for i, tag := range tags {
		f, err := wstest.ReadRawFrame(br)
		if err != nil || f.Op != opBinary || len(f.Payload) != MaxDirect || f.Payload[0] != tag || f.Payload[MaxDirect-1] != tag {
			t.Fatalf("frame %d: op %d, %d bytes (%v), want %d bytes of %c", i, f.Op, len(f.Payload), err, MaxDirect, tag)
		}
	}
	if f, err := wstest.ReadRawFrame(br); err != nil || f.Op != opPong || string(f.Payload) != "p" {
		t.Fatalf("after the frames: %+v %v, want the pong", f, err)
	}
	if err := <-finished; err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if err := <-pong; err != nil {
		t.Fatalf("WriteControl: %v", err)
	}
	// The socket is free again.
	if res, _ := w.WriteDirect(frameOf('y', 3)); res != DirectWhole {
		t.Fatalf("a direct write after the Rest: %d", res)
	}
}

// TestRestDropped: a Rest dropped (the connection is being dropped)
// releases the socket broken: half a frame is on the wire, so nothing
// more is written, neither a batch, nor a direct write, nor a control
// frame.
func TestRestDropped(t *testing.T) {
	w, _, br := cappedPair(t)
	_, rest, _ := fillToPartial(t, w, br)
	rest.Drop()
	if err := w.WriteBatch([]*buf.Buf{frameOf('b', 3)}, time.Time{}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a batch after a dropped rest: %v", err)
	}
	if res, _ := w.WriteDirect(frameOf('d', 3)); res != DirectClosing {
		t.Fatalf("a direct write after a dropped rest: %d", res)
	}
	if err := w.WriteControl([]byte{0x80 | opPong, 0}, time.Now().Add(time.Second)); err != nil { // wall clock: a real socket's deadline
		t.Fatalf("a control frame after a dropped rest: %v", err)
	}
}

// TestDirectAfterClose: once a close frame went out, a direct write drops
// its frame (DirectClosing), not counted as a write error.
func TestDirectAfterClose(t *testing.T) {
	w, _, br := cappedPair(t)
	if err := w.WriteClose(1000, "bye", time.Now().Add(time.Second)); err != nil { // wall clock: a real socket's deadline
		t.Fatal(err)
	}
	if res, r := w.WriteDirect(frameOf('x', 3)); res != DirectClosing || r.Held() {
		t.Fatalf("a direct write after the close frame: %d", res)
	}
	if f, err := wstest.ReadRawFrame(br); err != nil || f.Op != opClose {
		t.Fatalf("the peer read %+v %v, want the close frame", f, err)
	}
}
