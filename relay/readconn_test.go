package relay

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

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
	if _, err := c.Write(append([]byte(req), wstest.MaskedFrame(auth)...)); err != nil {
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
			case strings.Contains(g, "wstransport.(*Transport).readLoop"):
				readers++
				if strings.Contains(g, "net/http.(*conn).serve") {
					handlers++
				}
			case strings.Contains(g, "wstransport.(*Transport).writer"):
				writers++
			}
		}
		return readers == clients+1 && writers == clients+1
	})
	if handlers != 0 {
		t.Fatalf("%d connections are still read by their HTTP handler", handlers)
	}
}
