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
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/buf"
)

// recordingConn keeps a copy of every write that reaches the socket.
type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte // guarded by mu
}

// testFrames returns pooled-or-not frames of the given sizes, each filled
// with its own pattern, some starting at the headroom offset as a reader's
// frames do.
func testFrames(sizes []int, seed int) (batch []*buf.Buf, want [][]byte) {
	for i, n := range sizes {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(j*7 + i + seed)
		}
		off := (i % 2) * buf.Headroom
		b := buf.Get(off + n)
		if off+n > len(b.B) {
			b = buf.Unpooled(off + n)
		}
		b.Off, b.End = off, off+copy(b.B[off:], p)
		batch = append(batch, b)
		want = append(want, p)
	}
	return batch, want
}

// TestLinkConnBatch: frames a link's writer writes in batches reach a
// coder/websocket server (which refuses unmasked client frames) as
// ordinary binary messages, in order, whatever their length class (7, 16
// and 64 bit lengths, one larger than the batch buffer), and a batch of
// small frames costs one write. It also pins what a link's Writer assumes of
// coder/websocket's client: after the upgrade it writes only control
// frames on a link (here a pong and the close reply), each one whole in
// one Write, and no data frame follows the close frame.
func TestLinkConnBatch(t *testing.T) {
	sizes := []int{0, 1, 7, 8, 9, 125, 126, 1000, 65535, 70000, 3}
	small := make([]int, testBatch)
	for i := range small {
		small[i] = 16 + i
	}
	first, wantFirst := testFrames(sizes, 0)
	second, wantSecond := testFrames(small, 1)
	want := append(append([][]byte{}, wantFirst...), wantSecond...)

	serverDone := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serverDone <- readBatches(w, r, want, len(wantFirst))
	}))
	defer srv.Close()

	transport := &http.Transport{DialContext: DialContext(&net.Dialer{Timeout: 5 * time.Second})}
	defer transport.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	up, err := dialLink(ctx, &http.Client{Transport: transport}, "ws"+strings.TrimPrefix(srv.URL, "http"))
	if err != nil {
		t.Fatalf("dialLink: %v", err)
	}
	defer up.ws.CloseNow()
	if up.lc == nil || !up.lc.masked {
		t.Fatal("a ws:// link has no Writer")
	}
	rec := &recordingConn{Conn: up.lc.Conn}
	up.lc.Conn = rec // before anything reads or writes the link

	// The link's reader: answers the server's ping, delivers "go", then
	// answers the close.
	msgs := make(chan error, 2)
	go func() {
		for {
			_, p, err := up.ws.Read(ctx)
			if err == nil && string(p) != "go" {
				err = fmt.Errorf("unexpected message %q", p)
			}
			msgs <- err
			if err != nil {
				return
			}
		}
	}()

	if err := up.lc.WriteBatch(first, time.Time{}); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	if err := <-msgs; err != nil {
		t.Fatalf("waiting for the go-ahead: %v", err)
	}
	before := rec.count()
	if err := up.lc.WriteBatch(second, time.Now().Add(5*time.Second)); err != nil { // wall clock: a real socket's write deadline
		t.Fatalf("second batch: %v", err)
	}
	if n := rec.count() - before; n != 1 {
		t.Fatalf("a batch of %d small frames took %d writes, want 1", len(second), n)
	}
	var ce websocket.CloseError
	if err := <-msgs; !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "bye" {
		t.Fatalf("after the batches: %v, want close 1000 bye", err)
	}
	if err := <-serverDone; err != nil {
		t.Fatalf("server: %v", err)
	}
	late, _ := testFrames([]int{4}, 2)
	if err := up.lc.WriteBatch(late, time.Time{}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a batch after the close frame: %v, want net.ErrClosed", err)
	}

	// Parse everything the link wrote, in order, and place each frame
	// against the write boundaries.
	rec.mu.Lock()
	writes := rec.writes
	rec.mu.Unlock()
	var stream []byte
	bounds := map[int]int{0: 0} // stream offset -> index of the write starting there
	for i, w := range writes {
		stream = append(stream, w...)
		bounds[len(stream)] = i + 1
	}
	var controls []byte
	data := 0
	r := bytes.NewReader(stream)
	for r.Len() > 0 {
		at := len(stream) - r.Len()
		f, err := wstest.ReadRawFrame(r)
		if err != nil {
			t.Fatalf("parsing what the link wrote: %v", err)
		}
		if !f.Masked || !f.Fin {
			t.Fatalf("frame opcode %d: fin %v masked %v, want a final masked client frame", f.Op, f.Fin, f.Masked)
		}
		if f.Op < 0x8 {
			if f.Op != 0x2 || data >= len(want) || !bytes.Equal(f.Payload, want[data]) {
				t.Fatalf("data frame %d: opcode %d, %d bytes, want binary %d bytes", data, f.Op, len(f.Payload), len(want[min(data, len(want)-1)]))
			}
			data++
			continue
		}
		// A control frame is coder/websocket's: alone and whole in one write.
		end := len(stream) - r.Len()
		i, okStart := bounds[at]
		j, okEnd := bounds[end]
		if !okStart || !okEnd || j != i+1 {
			t.Fatalf("control frame (opcode %d) at bytes %d-%d is not exactly one write", f.Op, at, end)
		}
		controls = append(controls, f.Op)
		if f.Op == 0x8 && r.Len() != 0 {
			t.Fatalf("%d bytes written after the close frame", r.Len())
		}
	}
	if data != len(want) || !bytes.Equal(controls, []byte{0xa, 0x8}) {
		t.Fatalf("the link wrote %d data frames and control frames %x, want %d and a pong then a close", data, controls, len(want))
	}
}

// readBatches accepts a link as a holder would, reads want (pinging the
// link and sending the go-ahead after the first n messages) and closes
// with 1000 "bye".
func readBatches(w http.ResponseWriter, r *http.Request, want [][]byte, n int) error {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return err
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	pinged := make(chan error, 1)
	for i, p := range want {
		if i == n {
			go func() { // answered by the link's reader through its Writer
				err := ws.Ping(ctx)
				if err == nil {
					err = ws.Write(ctx, websocket.MessageBinary, []byte("go"))
				}
				pinged <- err
			}()
		}
		typ, got, err := ws.Read(ctx)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if typ != websocket.MessageBinary || !bytes.Equal(got, p) {
			return fmt.Errorf("message %d: type %v, %d bytes, want binary %d bytes of its pattern", i, typ, len(got), len(p))
		}
	}
	if err := <-pinged; err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return ws.Close(websocket.StatusNormalClosure, "bye")
}

func TestMaskBytes(t *testing.T) {
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	for n := range 140 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*31 + 5)
		}
		want := make([]byte, n)
		for i := range src {
			want[i] = src[i] ^ key[i%4]
		}
		dst := make([]byte, n+3)
		maskBytes(dst, src, key)
		if !bytes.Equal(dst[:n], want) || !bytes.Equal(dst[n:], []byte{0, 0, 0}) {
			t.Fatalf("maskBytes of %d bytes: %x, want %x", n, dst[:n], want)
		}
		maskBytes(src, src, key) // in place
		if !bytes.Equal(src, want) {
			t.Fatalf("maskBytes in place of %d bytes: %x, want %x", n, src, want)
		}
	}
}

func TestAppendMaskedHeader(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []byte
	}{
		{0, []byte{0x82, 0x80}},
		{125, []byte{0x82, 0x80 | 125}},
		{126, []byte{0x82, 0x80 | 126, 0, 126}},
		{65535, []byte{0x82, 0x80 | 126, 0xff, 0xff}},
		{65536, []byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		got, key := appendMaskedHeader([]byte{0xee}, tc.n)
		if want := append(append([]byte{0xee}, tc.want...), key[:]...); !bytes.Equal(got, want) {
			t.Errorf("appendMaskedHeader(%d) = %x, want %x", tc.n, got, want)
		}
	}
	_, k1 := appendMaskedHeader(nil, 1)
	_, k2 := appendMaskedHeader(nil, 1)
	_, k3 := appendMaskedHeader(nil, 1)
	if k1 == k2 && k2 == k3 {
		t.Errorf("three frames share the masking key %x", k1)
	}
}

// TestLinkConnWriteAllocatesNothing: writing a batch of masked frames
// costs no allocation (the batch buffer is pooled, keys come from the
// runtime's generator).
func TestLinkConnWriteAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	lc := NewWriter(discardConn{}, true)
	batch := make([]*buf.Buf, 0, testBatch)
	for _, size := range []int{64, 1024, 40000} {
		allocs := testing.AllocsPerRun(200, func() {
			batch = batch[:0]
			for range testBatch {
				b := buf.Get(size)
				b.End = size
				batch = append(batch, b)
			}
			if err := lc.WriteBatch(batch, time.Time{}); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Fatalf("writeBatch of %d-byte frames: %v allocations per batch, want 0", size, allocs)
		}
	}
}

// BenchmarkLinkConnWriteBatch: encoding and masking a full batch of
// frames into the batch buffer (the socket discards), per frame.
func BenchmarkLinkConnWriteBatch(b *testing.B) {
	for _, size := range []int{64, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			lc := NewWriter(discardConn{}, true)
			batch := make([]*buf.Buf, 0, testBatch)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; i < b.N; i += testBatch {
				batch = batch[:0]
				for range min(testBatch, b.N-i) {
					x := buf.Get(size)
					x.End = size
					batch = append(batch, x)
				}
				if err := lc.WriteBatch(batch, time.Time{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *recordingConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}
