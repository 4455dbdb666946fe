package wsframe

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/buf"
)

// TestCoderCloseFrameIsOneWrite: the longest control frame
// coder/websocket can send (a close with a 123-byte reason) fits its
// writer and reaches the socket in one write, so it cannot interleave
// with a batch of ours.
func TestCoderCloseFrameIsOneWrite(t *testing.T) {
	reason := strings.Repeat("r", 123)
	var writes atomic.Int64
	serverDone := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hw := &Hijacker{ResponseWriter: w}
		ws, err := websocket.Accept(hw, r, nil)
		if err != nil {
			serverDone <- err
			return
		}
		defer ws.CloseNow()
		hw.w.Conn = countingConn{Conn: hw.w.Conn, writes: &writes}
		err = ws.Close(websocket.StatusNormalClosure, reason)
		if n := writes.Load(); err == nil && n != 1 {
			err = errors.New("the close frame took more than one write")
		}
		serverDone <- err
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c := wstest.DialConn(t, "ws"+strings.TrimPrefix(srv.URL, "http"))
	_, _, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Reason != reason {
		t.Fatalf("Read: %v, want a close with the 123-byte reason", err)
	}
	if err := <-serverDone; err != nil {
		t.Fatalf("server: %v", err)
	}
}

// accepted is a connection the test's server upgraded as the relay does
// (coder/websocket's Accept through a Hijacker), and the client's socket.
type accepted struct {
	ws     *websocket.Conn
	hw     *Hijacker
	client net.Conn
	br     *bufio.Reader // the client's reads
}

// acceptWith dials a server that accepts through a Hijacker, sending
// after sends right behind the upgrade request, in the same write, and
// reads the 101.
func acceptWith(t *testing.T, after []byte) *accepted {
	t.Helper()
	got := make(chan *accepted, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hw := &Hijacker{ResponseWriter: w}
		ws, err := websocket.Accept(hw, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			got <- nil
			return
		}
		got <- &accepted{ws: ws, hw: hw}
	}))
	t.Cleanup(srv.Close)
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // wall clock: a real socket's deadline
	req := "GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := c.Write(append([]byte(req), after...)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	a := <-got
	if a == nil {
		t.Fatal("Accept failed")
	}
	t.Cleanup(func() { _ = a.ws.CloseNow() })
	a.client, a.br = c, br
	return a
}

// coderGoroutines counts the goroutines running coder/websocket's code.
func coderGoroutines() int {
	sb := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(sb[:runtime.Stack(sb, true)]), "\n\n") {
		if strings.Contains(g, "github.com/coder/websocket.") {
			n++
		}
	}
	return n
}

// TestCoderLeavesTheSocketToUs pins what the relay relies on once
// coder/websocket's Accept returns on an accepted connection: it hijacked
// through the Hijacker it was given (so the relay has the socket's
// Writer), it wrote its 101 before the hijack (so nothing went through
// the Writer: a 101 there would have looked like a close frame and shut
// the Writer), it left a frame sent right behind the upgrade request for
// the relay's Reader to read, and it runs nothing of its own that could
// read or write the socket behind the relay's back.
func TestCoderLeavesTheSocketToUs(t *testing.T) {
	before := coderGoroutines() // other tests' clients may still be ending
	a := acceptWith(t, clientFrame(opBinary, true, []byte("right behind")))
	w := a.hw.Writer()
	if w == nil {
		t.Fatal("Accept did not hijack through the Hijacker")
	}
	w.own.Lock()
	closeSent := w.closeSent
	w.own.Unlock()
	if closeSent {
		t.Fatal("something went through the Writer during the upgrade")
	}
	if n := coderGoroutines(); n > before {
		t.Fatalf("%d goroutines of coder/websocket run after Accept, %d before", n, before)
	}
	b, end := a.hw.Reader(1000, 0).NextBefore(time.Now().Add(5 * time.Second)) // wall clock: a real socket's deadline
	if end != EndNone || string(b.Frame()) != "right behind" {
		t.Fatalf("the frame behind the upgrade: end %v", end)
	}
	buf.Put(b)
	if err := w.WriteBatch([]*buf.Buf{buf.Of('o', 'k')}, time.Time{}); err != nil {
		t.Fatalf("a batch after the upgrade: %v", err)
	}
	if f, err := wstest.ReadRawFrame(a.br); err != nil || f.Op != opBinary || string(f.Payload) != "ok" {
		t.Fatalf("the client read %+v %v", f, err)
	}
}

// TestCoderReadsThroughTheHandedReader: coder/websocket reads through the
// small bufio.Reader it was handed at the hijack, and no further than it
// is asked: with two frames from the client in one write, it reads the
// first and the relay's Reader, through that same reader, the second.
// (A library that buffered the socket itself would hold the second.)
func TestCoderReadsThroughTheHandedReader(t *testing.T) {
	a := acceptWith(t, nil)
	two := append(clientFrame(opBinary, true, []byte("coder's")), clientFrame(opBinary, true, []byte("ours"))...)
	if _, err := a.client.Write(two); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, p, err := a.ws.Read(ctx); err != nil || string(p) != "coder's" {
		t.Fatalf("coder/websocket read %q %v", p, err)
	}
	b, end := a.hw.Reader(1000, 0).NextBefore(time.Now().Add(2 * time.Second)) // wall clock: a real socket's deadline
	if end != EndNone || string(b.Frame()) != "ours" {
		t.Fatalf("the relay's Reader: end %v", end)
	}
	buf.Put(b)
}
