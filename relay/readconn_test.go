package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		accepted <- c
	}()
	client, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	select {
	case server = <-accepted:
	case <-time.After(5 * time.Second):
	}
	if server == nil {
		client.Close()
		t.Fatal("Accept failed")
	}
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return client, server
}

func newTestReadConn(t *testing.T, nc net.Conn, leftover []byte) *readConn {
	t.Helper()
	rc := newReadConn(&frameConn{Conn: nc}, leftover)
	if rawReadSupported && rc.raw == nil {
		t.Fatal("a TCP connection should be read through its descriptor")
	}
	return rc
}

// TestReadConnStream: whatever the sizes of the reads, a readConn returns
// the bytes net/http had read past the request, then the socket's bytes,
// in order, then EOF, and holds no read buffer at the end.
func TestReadConnStream(t *testing.T) {
	client, server := tcpPair(t)
	rc := newTestReadConn(t, server, []byte("leftover"))
	want := make([]byte, 200_000)
	for i := range want {
		want[i] = byte(i*31 + i>>8)
	}
	written := make(chan error, 1)
	go func() {
		// Uneven chunks, so that reads see partial and merged writes.
		rest := want
		for i := 0; len(rest) > 0; i++ {
			n := min(len(rest), 1+(i*977)%9000)
			if _, err := client.Write(rest[:n]); err != nil {
				written <- err
				return
			}
			rest = rest[n:]
		}
		written <- client.(*net.TCPConn).CloseWrite()
	}()
	_ = server.SetReadDeadline(time.Now().Add(10 * time.Second)) // wall clock: a real socket's deadline
	var got []byte
	sizes := []int{1, 7, 300, readBufSize - 1, readBufSize, 70_000, 3}
	for i := 0; i < 100_000; i++ {
		p := make([]byte, sizes[i%len(sizes)])
		n, err := rc.Read(p)
		got = append(got, p[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
	}
	if err := <-written; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, append([]byte("leftover"), want...)) {
		t.Fatalf("read %d bytes, want the %d leftover and written bytes in order", len(got), 8+len(want))
	}
	if rc.rbuf != nil {
		t.Error("a drained readConn still holds its read buffer")
	}
}

// TestReadConnHoldsNoBufferWhileWaiting: a socket with nothing to read
// costs no read buffer; a pooled buffer is held only while it has bytes
// the reader has not taken yet.
func TestReadConnHoldsNoBufferWhileWaiting(t *testing.T) {
	if !rawReadSupported {
		t.Skip("reads go through net.Conn here")
	}
	client, server := tcpPair(t)
	rc := newTestReadConn(t, server, nil)
	var again bool
	if err := rc.raw.Control(func(fd uintptr) { again = !rc.fillFD(fd) }); err != nil {
		t.Fatalf("Control: %v", err)
	}
	if !again || rc.rbuf != nil {
		t.Fatalf("empty socket: wait %v, buffer held %v; want a wait and no buffer", again, rc.rbuf != nil)
	}
	if _, err := client.Write([]byte("abc")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second)) // wall clock: a real socket's deadline
	p := make([]byte, 8)
	if n, err := rc.Read(p[:1]); err != nil || n != 1 || p[0] != 'a' {
		t.Fatalf("Read = %d %v %q, want 1 byte a", n, err, p[:n])
	}
	if rc.rbuf == nil {
		t.Fatal("two unread bytes but no buffer")
	}
	if n, err := rc.Read(p); err != nil || string(p[:n]) != "bc" {
		t.Fatalf("Read = %q %v, want bc", p[:n], err)
	}
	if rc.rbuf != nil {
		t.Fatal("buffer still held after its bytes were read")
	}
}

// TestReadConnAllocatesNothing: reading game-sized messages costs no
// allocation.
func TestReadConnAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	client, server := tcpPair(t)
	rc := newTestReadConn(t, server, nil)
	_ = server.SetReadDeadline(time.Now().Add(10 * time.Second)) // wall clock: a real socket's deadline
	msg := bytes.Repeat([]byte{7}, 70)
	p := make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := client.Write(msg); err != nil {
			t.Fatal(err)
		}
		for left := len(msg); left > 0; {
			n, err := rc.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			left -= n
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per message, want 0", allocs)
	}
}

// TestHijackHandsSmallBuffers: coder/websocket gets a 256-byte reader and
// writer, not net/http's 4 KiB pair, and bytes the client sent right
// behind its request come first.
func TestHijackHandsSmallBuffers(t *testing.T) {
	type result struct {
		rs, ws int
		got    string
		err    error
	}
	done := make(chan result, 1)
	hijacked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hw := &hijackWriter{ResponseWriter: w}
		nc, brw, err := hw.Hijack()
		close(hijacked) // what the client sends from now on comes from the socket, not net/http's buffer
		if err != nil {
			done <- result{err: err}
			return
		}
		defer nc.Close()
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second)) // wall clock: a real socket's deadline
		p := make([]byte, len("early+late"))
		_, err = io.ReadFull(brw, p)
		done <- result{rs: brw.Reader.Size(), ws: brw.Writer.Size(), got: string(p), err: err}
	}))
	defer srv.Close()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	// The request and the first bytes after it in one write: net/http
	// reads them together.
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\nearly"); err != nil {
		t.Fatalf("Write: %v", err)
	}
	select {
	case <-hijacked:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not hijack the connection")
	}
	if _, err := io.WriteString(c, "+late"); err != nil {
		t.Fatalf("Write: %v", err)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not finish")
	}
	if res.err != nil {
		t.Fatalf("server: %v", res.err)
	}
	if res.rs != ctlBufSize || res.ws != ctlBufSize {
		t.Errorf("buffers %d and %d bytes, want %d", res.rs, res.ws, ctlBufSize)
	}
	if res.got != "early+late" {
		t.Errorf("read %q, want early+late", res.got)
	}
}

// TestFrameConnLongestCloseFrameIsOneWrite: the longest control frame
// coder/websocket can send (a close with a 123-byte reason) fits its
// writer and reaches the socket in one write, so it cannot interleave
// with a batch of ours.
func TestFrameConnLongestCloseFrameIsOneWrite(t *testing.T) {
	reason := strings.Repeat("r", 123)
	var writes atomic.Int64
	serverDone := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hw := &hijackWriter{ResponseWriter: w}
		ws, err := websocket.Accept(hw, r, nil)
		if err != nil {
			serverDone <- err
			return
		}
		defer ws.CloseNow()
		hw.fc.Conn = countingConn{Conn: hw.fc.Conn, writes: &writes}
		err = ws.Close(websocket.StatusNormalClosure, reason)
		if n := writes.Load(); err == nil && n != 1 {
			err = errors.New("the close frame took more than one write")
		}
		serverDone <- err
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http")).ws
	_, _, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Reason != reason {
		t.Fatalf("Read: %v, want a close with the 123-byte reason", err)
	}
	if err := <-serverDone; err != nil {
		t.Fatalf("server: %v", err)
	}
}

// TestAuthRightBehindUpgrade: a client that sends its authentication in
// the same TCP segment as its upgrade request is answered like any other.
func TestAuthRightBehindUpgrade(t *testing.T) {
	s := startRelay(t, Options{})
	_, clientSecret := mustAllocate(t, s, "early")
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.WSURL(), "ws://"), 5*time.Second)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second)) // wall clock: a real socket's deadline
	auth := wire.Auth{RoomName: "early", ClientSecret: clientSecret}.Marshal()
	req := "GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := c.Write(append([]byte(req), maskedFrame(auth)...)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	frame := make([]byte, 3)
	if _, err := io.ReadFull(br, frame); err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	if !bytes.Equal(frame, []byte{0x82, 1, wire.Authenticated}) {
		t.Fatalf("reply frame %x, want a binary [3]", frame)
	}
	c.Close()
	waitFor(t, "the connection gone", func() bool { return s.Stats().Connections == 0 })
}

// maskedFrame is one final binary client frame carrying p (< 126 bytes).
func maskedFrame(p []byte) []byte {
	key := [4]byte{1, 2, 3, 4}
	f := append([]byte{0x82, 0x80 | byte(len(p))}, key[:]...)
	for i, b := range p {
		f = append(f, b^key[i%4])
	}
	return f
}

// TestIdleConnectionLeavesTheHandler: once authenticated, a connection is
// read by a goroutine of its own, not by the HTTP handler (whose deep
// stack, request and 4 KiB buffers an idle connection would otherwise
// keep), and exactly one reader and one writer run per connection.
func TestIdleConnectionLeavesTheHandler(t *testing.T) {
	s := startRelay(t, Options{})
	hostSecret, clientSecret := mustAllocate(t, s, "idle")
	const clients = 4
	join(t, s, "idle", hostSecret)
	for range clients {
		join(t, s, "idle", clientSecret)
	}
	var readers, writers, handlers int
	waitFor(t, "one reader and one writer per connection", func() bool {
		sb := make([]byte, 1<<20)
		stacks := strings.Split(string(sb[:runtime.Stack(sb, true)]), "\n\n")
		readers, writers, handlers = 0, 0, 0
		for _, g := range stacks {
			switch {
			case strings.Contains(g, "relay.(*Server).wsReadLoop"):
				readers++
				if strings.Contains(g, "net/http.(*conn).serve") {
					handlers++
				}
			case strings.Contains(g, "relay.(*Server).wsWriter"):
				writers++
			}
		}
		return readers == clients+1 && writers == clients+1
	})
	if handlers != 0 {
		t.Fatalf("%d connections are still read by their HTTP handler", handlers)
	}
}
