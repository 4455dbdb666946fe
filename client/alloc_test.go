package client

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// TestReadsDoNotAllocate: NextInto and RecvInto read into the caller's
// buffer with no allocation per message (the load generator's hot path).
// The server writes every message first, then stays idle, so the count is
// the client's alone. Reads use a context without Done, as the bench does:
// a deadline costs coder/websocket one timer registration per read.
func TestReadsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	const runs = 50
	ready := make(chan struct{})
	payload := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	_, url := wsServer(t, func(ctx context.Context, c *websocket.Conn) {
		if _, _, err := c.Read(ctx); err != nil {
			return
		}
		_ = c.Write(ctx, websocket.MessageBinary, []byte{wire.Authenticated})
		msg := wire.AppendHostData(nil, 7, payload)
		for range 2 * (runs + 1) {
			_ = c.Write(ctx, websocket.MessageBinary, msg)
		}
		close(ready)
		_, _, _ = c.Read(ctx)
	})
	ctx := testCtx(t, 10*time.Second)
	h, err := DialHost(ctx, wire.Capability{Secret: "s"}, "room", &DialOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer h.CloseNow()
	c := &Client{l: h.l} // same connection, the client's read path
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatal("server did not write in time")
	}
	buf := make([]byte, ReadLimit)
	bg := context.Background()
	var bad error
	allocs := testing.AllocsPerRun(runs, func() {
		e, err := h.NextInto(bg, buf)
		if err != nil || e.Type != wire.ToHostData || e.ID != 7 || len(e.Payload) != len(payload) {
			bad = err
		}
	})
	if bad != nil || allocs != 0 {
		t.Fatalf("NextInto: %v allocations per message (err %v), want 0", allocs, bad)
	}
	allocs = testing.AllocsPerRun(runs, func() {
		n, err := c.RecvInto(bg, buf)
		if err != nil || n != 5+len(payload) {
			bad = err
		}
	})
	if bad != nil || allocs != 0 {
		t.Fatalf("RecvInto: %v allocations per message (err %v), want 0", allocs, bad)
	}
}

// TestSendOneDoesNotAllocate: SendOne builds its frame in a pooled buffer.
func TestSendOneDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race (sync.Pool drops items)")
	}
	_, url := wsServer(t, func(ctx context.Context, c *websocket.Conn) {
		if _, _, err := c.Read(ctx); err != nil {
			return
		}
		_ = c.Write(ctx, websocket.MessageBinary, []byte{wire.Authenticated})
		for {
			// No Done channel: a cancellable context costs coder/websocket a
			// timer registration per read, which would count against SendOne.
			// The client closing ends this loop.
			_, r, err := c.Reader(context.Background())
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, r); err != nil {
				return
			}
		}
	})
	ctx := testCtx(t, 10*time.Second)
	h, err := DialHost(ctx, wire.Capability{Secret: "s"}, "room", &DialOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer h.CloseNow()
	payload := make([]byte, 1024)
	bg := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if err := h.SendOne(bg, 3, payload); err != nil {
			t.Error(err)
		}
	})
	// The server goroutine reads concurrently; allow it a little slack.
	if allocs > 0.5 {
		t.Fatalf("SendOne: %v allocations per message, want 0", allocs)
	}
}

func TestParseEvent(t *testing.T) {
	e, err := ParseEvent(wire.AppendConnected(nil, 1, 2, 3))
	if err != nil || e.Type != wire.ToHostConnected || e.ID != 1 || e.Count() != 3 {
		t.Fatalf("connected: %+v %v", e, err)
	}
	if ids := e.AppendIDs(nil); len(ids) != 3 || ids[2] != 3 {
		t.Fatalf("ids %v", ids)
	}
	e, err = ParseEvent(wire.AppendDisconnected(nil, 9))
	if err != nil || e.Type != wire.ToHostDisconnected || e.ID != 9 || e.Count() != 1 {
		t.Fatalf("disconnected: %+v %v", e, err)
	}
	e, err = ParseEvent([]byte{wire.ToHostNATIntroduce, 'a', 'b'})
	if err != nil || string(e.Payload) != "ab" || e.Count() != 0 {
		t.Fatalf("nat: %+v %v", e, err)
	}
	for _, b := range [][]byte{nil, {0}, {0, 1, 2}, {1, 1, 0, 0}, {2, 1}, {9}} {
		if _, err := ParseEvent(b); err == nil {
			t.Errorf("ParseEvent(%x): want an error", b)
		}
		// Same verdict as wire's allocating parser.
		if _, err2 := wire.ParseToHostPacket(b); err2 == nil {
			t.Errorf("wire.ParseToHostPacket(%x) accepts what ParseEvent refuses", b)
		}
	}
}

// TestBufferTooSmall: a message longer than the buffer is consumed and
// reported; the next message reads normally.
func TestBufferTooSmall(t *testing.T) {
	_, url := wsServer(t, func(ctx context.Context, c *websocket.Conn) {
		if _, _, err := c.Read(ctx); err != nil {
			return
		}
		_ = c.Write(ctx, websocket.MessageBinary, []byte{wire.Authenticated})
		_ = c.Write(ctx, websocket.MessageBinary, make([]byte, 100))
		_ = c.Write(ctx, websocket.MessageBinary, []byte("ok"))
		_, _, _ = c.Read(ctx)
	})
	ctx := testCtx(t, 10*time.Second)
	c, err := DialClient(ctx, wire.Capability{Secret: "s"}, "room", &DialOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	buf := make([]byte, 10)
	if _, err := c.RecvInto(ctx, buf); err == nil || !errors.Is(err, ErrBufferTooSmall) {
		t.Fatalf("err = %v, want ErrBufferTooSmall", err)
	}
	n, err := c.RecvInto(ctx, buf)
	if err != nil || string(buf[:n]) != "ok" {
		t.Fatalf("next message = %q, %v", buf[:n], err)
	}
}
