package relay

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// Short limits for the tests below; the bound on each case is its limit
// plus a margin for a loaded machine.
var testLimits = wire.HTTPLimits{Header: 200 * time.Millisecond, Read: 400 * time.Millisecond,
	Write: time.Second, Idle: 400 * time.Millisecond}

const limitMargin = 3 * time.Second

// closedWithin reads conn until it ends (the server closed it) and fails
// unless that happened within bound of start. Its wait is the socket's
// own deadline (wall clock: it bounds the server's timers).
func closedWithin(t *testing.T, conn net.Conn, start time.Time, bound time.Duration, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(start.Add(bound))
	// EOF or a reset (the relay closed with our bytes unread) is closed;
	// only the deadline means it is still open.
	var ne net.Error
	if _, err := io.Copy(io.Discard, conn); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: still open after %v (%v)", what, bound, err)
	}
}

// ports are the relay's two TCP listeners.
func ports(s *Server) map[string]string {
	ws, _ := url.Parse(s.WSURL())
	h, _ := url.Parse(s.HTTPURL())
	return map[string]string{"http": h.Host, "websocket": ws.Host}
}

// A request that declares a body and never sends it, and one that
// trickles its headers (slowloris), are closed at the HTTP limits on both
// ports, without a credential.
func TestSilentBodyAndSlowHeadersClosed(t *testing.T) {
	s := startRelay(t, Options{HTTP: testLimits})
	for port, addr := range ports(s) {
		t.Run(port, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now() // wall clock: the HTTP limits are the sockets' deadlines
			_, _ = io.WriteString(c, "GET /ping HTTP/1.1\r\nHost: relay\r\nContent-Length: 200000\r\n\r\n")
			closedWithin(t, c, start, testLimits.Read+limitMargin, "a request with a silent body")

			slow, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			start = time.Now()                                                   // wall clock: as above
			_, _ = io.WriteString(slow, "GET /ping HTTP/1.1\r\nHost: relay\r\n") // and nothing more
			closedWithin(t, slow, start, testLimits.Header+limitMargin, "a request with unfinished headers")
		})
	}
}

// An upgraded WebSocket that never authenticates is closed at the
// authentication timeout on both ports; an authenticated one outlives the
// HTTP limits (the upgrade leaves them behind).
func TestNeverAuthenticatingClosedAuthenticatedKept(t *testing.T) {
	s := startRelay(t, Options{HTTP: testLimits, AuthTimeout: 300 * time.Millisecond})
	hs, cs := mustAllocate(t, s, "kept")
	for _, u := range []string{s.WSURL(), "ws" + strings.TrimPrefix(s.HTTPURL(), "http")} {
		p := wstest.Dial(t, u)
		start := time.Now() // wall clock: the authentication timeout is the socket read's deadline
		p.Closed()          // abruptly: nothing is owed to a peer that never spoke
		if el := time.Since(start); el > 300*time.Millisecond+limitMargin {
			t.Fatalf("%s: a silent WebSocket closed after %v", u, el)
		}
	}
	h := join(t, s, "kept", hs)
	// Past every HTTP limit (a wall-clock wait: the limits are the
	// sockets' deadlines), the host still talks.
	time.Sleep(2 * testLimits.Read) // wall clock: past the sockets' deadlines, which only real time reaches
	h.Send([]byte{wire.HostKeepAlive})
	join(t, s, "kept", cs)
	h.ExpectToHost(wire.ToHostConnected)
}

// Every answer the relay can shape is JSON: CONNECT, unclean and
// relative paths, and bad WebSocket handshakes, on both ports.
func TestOddRequestsAnsweredInJSON(t *testing.T) {
	s := startRelay(t, Options{})
	for port, addr := range ports(s) {
		for _, tc := range []struct {
			req    string
			status int
		}{
			{"CONNECT relay:443 HTTP/1.1\r\nHost: relay:443\r\n\r\n", http.StatusMethodNotAllowed},
			{"GET /../x HTTP/1.1\r\nHost: relay\r\n\r\n", http.StatusBadRequest},
			{"GET //ping HTTP/1.1\r\nHost: relay\r\n\r\n", http.StatusBadRequest},
			{"OPTIONS * HTTP/1.1\r\nHost: relay\r\n\r\n", http.StatusOK}, // net/http's own, empty (README)
			{"GET * HTTP/1.1\r\nHost: relay\r\n\r\n", http.StatusBadRequest},
			{"GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", http.StatusBadRequest},
			{"GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n", http.StatusUpgradeRequired},
			{"POST / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n", http.StatusBadRequest},
		} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.WriteString(c, tc.req)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("%s %q: %v", port, tc.req, err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			c.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s %q: %d %s, want %d", port, firstLine(tc.req), resp.StatusCode, body, tc.status)
				continue
			}
			if tc.status != http.StatusOK && (resp.Header.Get("Content-Type") != "application/json" ||
				!strings.Contains(string(body), `"retryable"`)) {
				t.Errorf("%s %q: not the JSON error shape: %q %s", port, firstLine(tc.req), resp.Header.Get("Content-Type"), body)
			}
		}
	}
}

func firstLine(s string) string { return s[:strings.Index(s, "\r\n")] }

// A relay holds at most MaxRooms rooms: past it an allocation is
// relay_full (503, retryable), which the balancer takes as "another
// relay".
func TestRoomCap(t *testing.T) {
	s := startRelay(t, Options{MaxRooms: 2})
	mustAllocate(t, s, "one")
	mustAllocate(t, s, "two")
	if _, status, e := allocate(t, s, "three", "id-3"); status != http.StatusServiceUnavailable || e.Code != wire.ErrRelayFull.Code || !e.Retryable {
		t.Fatalf("a third room: %d %v", status, e)
	}
	if _, status, _ := allocate(t, s, "one", "alloc-one"); status != http.StatusOK {
		t.Fatalf("a replay of an existing room at the cap: %d", status)
	}
}

// WebSocket connections between their upgrade and their authentication
// are bounded per source (and in all): past the bound an upgrade is 503
// too_many_connections with Retry-After; one authenticating frees a slot.
func TestPendingConnectionsBoundedPerSource(t *testing.T) {
	s := startRelay(t, Options{MaxPendingPerSource: 2})
	hs, _ := mustAllocate(t, s, "pending")
	a, b := wstest.Dial(t, s.WSURL()), wstest.Dial(t, s.WSURL())
	waitFor(t, "two connections waiting", func() bool { return s.Stats().Connections == 2 })
	req, _ := http.NewRequest(http.MethodGet, s.WSURL(), nil)
	req.URL.Scheme = "http"
	for k, v := range map[string]string{"Upgrade": "websocket", "Connection": "Upgrade",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"} {
		req.Header.Set(k, v)
	}
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(body), `"too_many_connections"`) {
		t.Fatalf("a third unauthenticated connection from one source: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := a.Auth("pending", hs); got != wire.Authenticated {
		t.Fatalf("auth %d", got)
	}
	_ = b
	// The authenticated connection's handler gives its slot back just
	// after the [3] went out: wait for that, not for luck.
	waitFor(t, "the authenticated connection's slot to be given back", func() bool { return s.ws.PendingCount() == 1 })
	if p := wstest.Dial(t, s.WSURL()); p == nil {
		t.Fatal("no slot after one authenticated")
	}
}
