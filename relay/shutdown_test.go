package relay

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

func TestShutdownReturnsOnceConnectionsLeave(t *testing.T) {
	s := startRelay(t, Options{DrainTimeout: 20 * time.Second})
	host, client, _ := hostWithClient(t, s, "room")
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	waitFor(t, "draining", func() bool { return s.core.Draining() })
	_ = client.WS.Close(websocket.StatusNormalClosure, "")
	_ = host.WS.Close(websocket.StatusNormalClosure, "")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown still waiting after every connection left")
	}
}

func TestCloseDoesNotHangOnAPeerThatNeverReads(t *testing.T) {
	s := startRelay(t, Options{})
	host, client, _ := hostWithClient(t, s, "room")
	_ = client          // never reads: it will not answer the close handshake
	start := time.Now() // wall clock: Close's bound on real sockets
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if code := host.Closed(); code != websocket.StatusServiceRestart {
		t.Fatalf("host close status %v, want 1012", code)
	}
	// Nothing is served any more.
	if _, err := http.Get(s.HTTPURL() + "/ping"); err == nil {
		t.Fatal("HTTP port still serving after Close")
	}
}

func TestWebSocketPortDisabled(t *testing.T) {
	s := startRelay(t, Options{WSPort: -1})
	if s.WSURL() != "ws"+s.HTTPURL()[len("http"):] {
		t.Fatalf("WSURL %s with HTTP %s", s.WSURL(), s.HTTPURL())
	}
	a, _, _ := allocate(t, s, "room", "a")
	if want := s.httpLn.Addr().(*net.TCPAddr).Port; a.Capability.Port != want {
		t.Fatalf("advertised port %d, want the HTTP port %d", a.Capability.Port, want)
	}
	p := wstest.Dial(t, s.WSURL())
	if got := p.Auth("room", a.Capability.Secret); got != wire.Authenticated {
		t.Fatalf("auth on the HTTP port: %d", got)
	}
}

// TestEndedSessionsAreForgotten: the relay tracks accepted TCP connections
// (hijacked WebSockets included) only while they live, so that a relay up
// for weeks holds no entry per session it ever served.
func TestEndedSessionsAreForgotten(t *testing.T) {
	s := startRelay(t, Options{})
	tracked := func() int {
		s.raw.mu.Lock()
		defer s.raw.mu.Unlock()
		return len(s.raw.m)
	}
	for range 5 {
		p := wstest.Dial(t, s.WSURL())
		p.Send([]byte(`{"pipe":true}`))
		_ = p.Recv()
		_ = p.WS.Close(websocket.StatusNormalClosure, "")
	}
	waitFor(t, "every ended session to be forgotten", func() bool { return tracked() == 0 })
}

// TestCloseEndsAHalfSentRequest: Close does not wait for a request that is
// still arriving (its header timeout may be far off): once the servers'
// shutdown grace is over, such connections are closed.
func TestCloseEndsAHalfSentRequest(t *testing.T) {
	s := startRelay(t, Options{})
	h, _ := url.Parse(s.HTTPURL())
	c, err := net.Dial("tcp", h.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /ping HTTP/1.1\r\nHost: relay\r\n"); err != nil { // no end of headers
		t.Fatal(err)
	}
	start := time.Now() // wall clock: the socket deadline closedWithin sets
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, c, start, 3*time.Second, "a half-sent request at Close")
}

// TestStartFailureReleasesItsPorts: a relay whose UDP port is taken fails
// to start and leaves none of its TCP ports bound, so a retry can have
// them.
func TestStartFailureReleasesItsPorts(t *testing.T) {
	taken, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free := func(network string) int {
		l, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	httpPort, wsPort := free("tcp"), free("tcp")
	s, err := New(Options{Secret: "s", ListenHost: "127.0.0.1", HTTPPort: httpPort, WSPort: wsPort,
		UDPPortV2: taken.LocalAddr().(*net.UDPAddr).Port, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		_ = s.Close()
		t.Fatal("started on a UDP port that is taken")
	}
	for _, p := range []int{httpPort, wsPort} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", itoa(p)))
		if err != nil {
			t.Fatalf("port %d still bound after the failed start: %v", p, err)
		}
		l.Close()
	}
}
