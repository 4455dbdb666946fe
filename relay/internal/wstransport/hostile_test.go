package wstransport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// rawWS is a WebSocket client written by hand on a TCP socket, for peers
// that misbehave: upgrades that never authenticate, frames that lie.
type rawWS struct {
	tb testing.TB
	nc net.Conn
	br *bufio.Reader
}

// rawUpgrade asks r for an upgrade from source address from (a loopback
// alias) and returns the answer's status; the socket is the test's when
// it is 101.
func (r *rig) rawUpgrade(from string) (*rawWS, int) {
	r.tb.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	addr := strings.TrimPrefix(r.srv.URL, "http://")
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		r.tb.Fatalf("dial from %s: %v", from, err)
	}
	r.tb.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second)) // wall clock: a real socket's deadline
	fmt.Fprintf(nc, "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", addr)
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		r.tb.Fatalf("upgrade from %s: %v", from, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return &rawWS{tb: r.tb, nc: nc, br: br}, resp.StatusCode
}

// frame writes one masked binary frame carrying p, final.
func (c *rawWS) frame(p []byte) {
	c.tb.Helper()
	f := binary.BigEndian.AppendUint64([]byte{0x82, 0x80 | 127}, uint64(len(p)))
	f = append(f, 0, 0, 0, 0) // a zero key: the payload as it is
	if _, err := c.nc.Write(append(f, p...)); err != nil {
		c.tb.Fatalf("write: %v", err)
	}
}

// write writes raw bytes.
func (c *rawWS) write(b []byte) {
	c.tb.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.tb.Fatalf("write: %v", err)
	}
}

// next reads one server frame within d: its opcode and payload.
func (c *rawWS) next(d time.Duration) (op byte, p []byte, err error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(d)) // wall clock: a real socket's deadline
	var h [2]byte
	if _, err = io.ReadFull(c.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		_, err = io.ReadFull(c.br, l[:])
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		_, err = io.ReadFull(c.br, l[:])
		n = binary.BigEndian.Uint64(l[:])
	}
	if err != nil {
		return 0, nil, err
	}
	p = make([]byte, n)
	_, err = io.ReadFull(c.br, p)
	return h[0] & 0x0f, p, err
}

// expectClose reads frames until a close frame, which must come within d
// and carry code.
func (c *rawWS) expectClose(d time.Duration, code uint16) {
	c.tb.Helper()
	for {
		op, p, err := c.next(d)
		if err != nil {
			c.tb.Fatalf("no close frame within %v: %v", d, err)
		}
		if op != 0x8 {
			continue
		}
		if len(p) < 2 || binary.BigEndian.Uint16(p) != code {
			c.tb.Fatalf("close frame %x, want code %d", p, code)
		}
		return
	}
}

// expectEnd fails unless the relay ends the socket within d.
func (c *rawWS) expectEnd(d time.Duration) {
	c.tb.Helper()
	for {
		if _, _, err := c.next(d); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				c.tb.Fatalf("the socket still open after %v", d)
			}
			return
		}
	}
}

// auth authenticates as the host of room, and reads the [3].
func (c *rawWS) auth(room, secret string) {
	c.tb.Helper()
	c.frame(wire.Auth{RoomName: room, ClientSecret: secret}.Marshal())
	op, p, err := c.next(5 * time.Second)
	if err != nil || op != 0x2 || len(p) != 1 || p[0] != wire.Authenticated {
		c.tb.Fatalf("auth answer op %d %v (%v), want [%d]", op, p, err, wire.Authenticated)
	}
}

// TestPendingPoolPushesOutTheOldest: upgrades that never authenticate,
// from several addresses each within its own bound, fill the pool; a
// player from another address is still let in, the oldest of them pushed
// out (its socket closed), and hosts a room a client then plays in. A
// source at its own bound is still refused.
func TestPendingPoolPushesOutTheOldest(t *testing.T) {
	s := newRig(t, rigConfig{maxPending: 8, maxPendingPerSource: 2})
	var squatters []*rawWS
	for i := 2; i <= 5; i++ {
		for range 2 {
			c, status := s.rawUpgrade(fmt.Sprintf("127.0.0.%d", i))
			if status != http.StatusSwitchingProtocols {
				t.Fatalf("upgrade %d from 127.0.0.%d: %d, want 101", len(squatters)+1, i, status)
			}
			squatters = append(squatters, c)
		}
	}
	testutil.Eventually(t, 5*time.Second, "the pool full", func() bool { return s.tr.PendingCount() == 8 })

	hs, cs := s.allocate("room")
	host := s.join("room", hs) // pushes out the oldest
	squatters[0].expectEnd(5 * time.Second)
	// The host holds its place until its upgrade's handler returns, just
	// after the reply it read: wait for that, or the next upgrade would
	// find the pool full and push out one more.
	testutil.Eventually(t, 5*time.Second, "the host's place given back", func() bool { return s.tr.PendingCount() == 7 })
	// The flood goes on from a new address: the pool is full again.
	c, status := s.rawUpgrade("127.0.0.6")
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade from 127.0.0.6: %d, want 101", status)
	}
	squatters = append(squatters, c)
	testutil.Eventually(t, 5*time.Second, "the pool full again", func() bool { return s.tr.PendingCount() == 8 })
	client := s.join("room", cs) // pushes out the next oldest
	squatters[1].expectEnd(5 * time.Second)
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	client.Send([]byte("hello"))
	if pk := host.ExpectToHost(wire.ToHostData); pk.IDs[0] != id || !equal(pk.Payload, "hello") {
		t.Fatalf("host got %+v", pk)
	}
	host.Send(sendOne(id, "welcome"))
	if got := client.Recv(); !equal(got, "welcome") {
		t.Fatalf("client got %q", got)
	}
	if got := s.metric("purrfly_relay_evicted_pending_total", "", ""); got != 2 {
		t.Fatalf("%v connections pushed out, want 2", got)
	}
	// 127.0.0.3 still holds its two: its third is refused.
	if _, status := s.rawUpgrade("127.0.0.3"); status != http.StatusServiceUnavailable {
		t.Fatalf("a third upgrade from a source at its bound: %d, want 503", status)
	}
	for _, c := range squatters {
		c.nc.Close()
	}
}

// TestTooBigFrameRefusedAtTheHeader: a frame header announcing more than
// a message may hold, with nothing behind it, gets its 1009 at once,
// before the authentication (whose deadline is far) and after it.
func TestTooBigFrameRefusedAtTheHeader(t *testing.T) {
	huge := binary.BigEndian.AppendUint64([]byte{0x82, 0x80 | 127}, 1<<63-1)
	huge = append(huge, 1, 2, 3, 4)
	s := newRig(t, rigConfig{messageTimeout: 200 * time.Millisecond}) // the drain after the 1009
	for _, authenticated := range []bool{false, true} {
		c, status := s.rawUpgrade("127.0.0.1")
		if status != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %d", status)
		}
		if authenticated {
			hs, _ := s.allocate(fmt.Sprintf("room-%v", authenticated))
			c.auth(fmt.Sprintf("room-%v", authenticated), hs)
		}
		c.write(huge)
		c.expectClose(2*time.Second, 1009) // the rig's authentication deadline is 10 s
		c.expectEnd(5 * time.Second)
	}
}

// TestStalledFrameEnded: a frame announcing 60 KB of which 100 bytes come
// ends its connection once the message bound has passed, before the
// authentication and after it (peer_timeout).
func TestStalledFrameEnded(t *testing.T) {
	const bound = 200 * time.Millisecond
	stalled := binary.BigEndian.AppendUint64([]byte{0x82, 0x80 | 127}, 60_000)
	stalled = append(append(stalled, 0, 0, 0, 0), make([]byte, 100)...)
	s := newRig(t, rigConfig{messageTimeout: bound})
	for _, authenticated := range []bool{false, true} {
		c, status := s.rawUpgrade("127.0.0.1")
		if status != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %d", status)
		}
		if authenticated {
			hs, _ := s.allocate("stalled")
			c.auth("stalled", hs)
		}
		before := s.metric("purrfly_relay_disconnects_total", "reason", core.ReasonPeerTimeout.String())
		c.write(stalled)
		c.expectEnd(10 * bound) // the rig's authentication deadline is 10 s
		testutil.Eventually(t, 5*time.Second, "the stalled connection counted", func() bool {
			return s.metric("purrfly_relay_disconnects_total", "reason", core.ReasonPeerTimeout.String()) == before+1
		})
	}
}
