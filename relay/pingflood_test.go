package relay

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purrfly/purrfly/relay/internal/core"
)

// TestPingFloodWithoutReadingIsDropped: a peer that upgrades, then sends
// pings and never reads their pongs, fills its own socket toward it; the
// relay's pong write then waits. It is bounded by the authentication's
// deadline, so the peer is dropped at the authentication timeout like any
// silent one, and its slot among the pending upgrades is free again (it
// used to wait for good, holding the handler).
func TestPingFloodWithoutReadingIsDropped(t *testing.T) {
	if !canCapSocketBuffers {
		t.Skip("needs capped socket buffers")
	}
	const authTimeout = 300 * time.Millisecond
	s := startRelay(t, Options{AuthTimeout: authTimeout})
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		return capSocketBuffer(c, soRcvBuf, 4096)
	}}
	nc, err := d.Dial("tcp", strings.TrimPrefix(s.WSURL(), "ws://"))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer nc.Close()
	req := "GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := nc.Write([]byte(req)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second)) // wall clock: a real socket's deadline
	if resp, err := http.ReadResponse(bufio.NewReader(nc), nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	// Pings until the relay drops the socket (the write fails) or 40 MB
	// went out, far more than the sockets between the two hold.
	ping := bytes.Repeat(pingFrame(bytes.Repeat([]byte{'p'}, 125)), 64)
	flooded := make(chan int, 1)
	go func() {
		sent := 0
		for sent < 40<<20 {
			n, err := nc.Write(ping)
			sent += n
			if err != nil {
				break
			}
		}
		flooded <- sent
	}()
	start := time.Now() // wall clock: the bound is the socket's own deadline
	waitFor(t, "the flooding peer dropped at the authentication timeout", func() bool {
		return disconnects(t, s, core.ReasonAuthTimeout) == 1
	})
	if el := time.Since(start); el > authTimeout+limitMargin {
		t.Fatalf("dropped after %v, want about %v", el, authTimeout)
	}
	if sent := <-flooded; sent >= 40<<20 {
		t.Fatalf("the relay took %d bytes of pings without dropping the peer", sent)
	}
	// The drop is counted as the connection closes; its slot is freed
	// as the handler returns, moments later.
	waitFor(t, "the dropped peer's connection gone from the stats", func() bool { return s.Stats().Connections == 0 })
}

// pingFrame is one masked ping frame carrying p (at most 125 bytes).
func pingFrame(p []byte) []byte {
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	f := append([]byte{0x80 | 0x9, 0x80 | byte(len(p))}, key[:]...)
	for i, c := range p {
		f = append(f, c^key[i%4])
	}
	return f
}
