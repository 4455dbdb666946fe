package wsframe

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/wstest"
)

func newTestReadConn(t *testing.T, nc net.Conn, leftover []byte) *readConn {
	t.Helper()
	rc := newReadConn(newWriter(nc, false), leftover)
	if rawReadSupported && rc.raw == nil {
		t.Fatal("a TCP connection should be read through its descriptor")
	}
	return rc
}

// TestReadConnStream: whatever the sizes of the reads, a readConn returns
// the bytes net/http had read past the request, then the socket's bytes,
// in order, then EOF, and holds no read buffer at the end.
func TestReadConnStream(t *testing.T) {
	client, server := wstest.TCPPair(t)
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
	client, server := wstest.TCPPair(t)
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
	client, server := wstest.TCPPair(t)
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
		hw := &Hijacker{ResponseWriter: w}
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
