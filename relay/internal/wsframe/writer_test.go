package wsframe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/buf"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

// TestFrameConnBatch: a batch of queued frames reaches the peer as
// ordinary binary messages, in order, whatever their length class (7, 16
// and 64 bit lengths, one larger than the batch buffer), and a batch of
// small frames costs one write system call. coder/websocket's own frames
// (pong, close) still go through the same socket.
func TestFrameConnBatch(t *testing.T) {
	var writes atomic.Int64
	sizes := []int{0, 1, 125, 126, 1000, 65535, 70000, 3}
	var small []int
	for i := range 64 {
		small = append(small, 16+i)
	}
	payload := func(n, seed int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*7 + seed)
		}
		return p
	}
	batchOf := func(sizes []int) []*buf.Buf {
		var batch []*buf.Buf
		for i, n := range sizes {
			b := buf.Get(n)
			if n > len(b.B) {
				b = buf.Unpooled(n)
			}
			b.Off, b.End = 0, copy(b.B, payload(n, i))
			batch = append(batch, b)
		}
		return batch
	}

	serverDone := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serverDone <- serveBatches(w, r, &writes, batchOf(sizes), batchOf(small))
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c := wstest.DialConn(t, "ws"+strings.TrimPrefix(srv.URL, "http")) // read limit 1 MiB
	pinged := make(chan error, 1)
	for i, n := range append(append([]int{}, sizes...), small...) {
		seed := i
		if i >= len(sizes) {
			seed = i - len(sizes)
		}
		if i == len(sizes) {
			// Between the batches: a ping answered by the server's
			// reader through the same socket, then the go-ahead.
			go func() {
				err := c.Ping(ctx)
				if err == nil {
					err = c.Write(ctx, websocket.MessageBinary, []byte("go"))
				}
				pinged <- err
			}()
		}
		typ, got, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if typ != websocket.MessageBinary || !bytes.Equal(got, payload(n, seed)) {
			t.Fatalf("message %d: type %v, %d bytes, want binary %d bytes of its pattern", i, typ, len(got), n)
		}
	}
	_, _, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "bye" {
		t.Fatalf("after the batches: %v, want close 1000 bye", err)
	}
	if err := <-pinged; err != nil {
		t.Errorf("Ping: %v", err)
	}
	if err := <-serverDone; err != nil {
		t.Fatalf("server: %v", err)
	}
}

// serveBatches upgrades as the relay does, writes the first batch, waits
// for the client's go-ahead, writes the second (checking that it costs one
// write) and closes with 1000 "bye".
func serveBatches(w http.ResponseWriter, r *http.Request, writes *atomic.Int64, first, second []*buf.Buf) error {
	hw := &Hijacker{ResponseWriter: w}
	ws, err := websocket.Accept(hw, r, nil)
	if err != nil {
		return err
	}
	defer ws.CloseNow()
	fc := hw.w
	fc.Conn = countingConn{Conn: fc.Conn, writes: writes}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	goAhead := make(chan error, 1)
	readDone := make(chan struct{})
	go func() { // answers pings, takes the go-ahead, then the close handshake
		defer close(readDone)
		_, _, err := ws.Read(ctx)
		goAhead <- err
		_, _, _ = ws.Read(ctx)
	}()
	defer func() { <-readDone }()
	if err := fc.WriteBatch(first, time.Time{}); err != nil {
		return err
	}
	if err := <-goAhead; err != nil {
		return err
	}
	before := writes.Load()
	if err := fc.WriteBatch(second, time.Now().Add(5*time.Second)); err != nil { // wall clock: a real socket's write deadline
		return err
	}
	if n := writes.Load() - before; n != 1 {
		return fmt.Errorf("a batch of %d small frames took %d writes, want 1", len(second), n)
	}
	return ws.Close(websocket.StatusNormalClosure, "bye")
}

func TestAppendFrameHeader(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []byte
	}{
		{0, []byte{0x82, 0}},
		{125, []byte{0x82, 125}},
		{126, []byte{0x82, 126, 0, 126}},
		{65535, []byte{0x82, 126, 0xff, 0xff}},
		{65536, []byte{0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		if got := appendFrameHeader(nil, tc.n); !bytes.Equal(got, tc.want) {
			t.Errorf("appendFrameHeader(%d) = %x, want %x", tc.n, got, tc.want)
		}
	}
}

// discardConn swallows writes.
type discardConn struct{ net.Conn }

// TestFrameConnWriteAllocatesNothing: writing a batch costs no allocation
// (the batch buffer is pooled).
func TestFrameConnWriteAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	fc := newWriter(discardConn{}, false)
	batch := make([]*buf.Buf, 0, testBatch)
	allocs := testing.AllocsPerRun(200, func() {
		batch = batch[:0]
		for range testBatch {
			b := buf.Get(64)
			b.End = 64
			batch = append(batch, b)
		}
		if err := fc.WriteBatch(batch, time.Time{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("writeBatch: %v allocations per batch, want 0", allocs)
	}
}

// TestFrameConnExactFitIsOneWrite: frames that exactly fill the batch
// buffer (counting the largest header for the last) go out in one write;
// an empty write, which the io.Writer contract allows, passes through.
func TestFrameConnExactFitIsOneWrite(t *testing.T) {
	var writes atomic.Int64
	fc := newWriter(countingConn{Conn: discardConn{}, writes: &writes}, false)
	first := 1000 // its header is 4 bytes (16-bit length)
	second := batchBufSize - (frameHeaderLen(first, false) + first) - maxFrameHeader
	batch := make([]*buf.Buf, 0, 2)
	for _, n := range []int{first, second} {
		b := buf.Get(n)
		b.End = n
		batch = append(batch, b)
	}
	if err := fc.WriteBatch(batch, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 1 {
		t.Fatalf("a batch that fits the buffer exactly took %d writes, want 1", n)
	}
	// A frame larger than the buffer: its header, then its payload, and
	// no empty write after them.
	writes.Store(0)
	big := buf.Get(40 << 10)
	big.End = 40 << 10
	if err := fc.WriteBatch([]*buf.Buf{big}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 2 {
		t.Fatalf("a frame larger than the buffer took %d writes, want 2", n)
	}
	fc.upgraded = true // where coder/websocket's own frames are looked at
	if n, err := fc.Write(nil); n != 0 || err != nil {
		t.Fatalf("empty write: %d %v", n, err)
	}
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }
