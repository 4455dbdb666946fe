package relay

import (
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// A relay that is closing (finish set s.closed; the UDP endpoint is
// closed only after waitSessions) refuses a new UDP peer in Connected.
// litenet then closes the peer with p.Close(false), which calls p.Wake:
// the flusher calls Handler.Flush on it, and the UDP transport's Flush asserts
// p.Tag.(*conn) (udptransport) on a nil Tag: the relay process panics.
func TestUDPPeerRefusedWhileClosing(t *testing.T) {
	s := startRelay(t, Options{})
	s.mu.Lock()
	s.closed = true // as finish does before it waits for the sessions
	s.mu.Unlock()
	t.Cleanup(func() { s.mu.Lock(); s.closed = false; s.mu.Unlock() })
	pr := &probe{done: make(chan litenet.Reason, 1)}
	ep, _, err := litenet.Dial(tctx(t), netip.MustParseAddrPort(s.UDPAddr()), "PurrNet",
		litenet.Config{Handler: pr, PingInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	select {
	case why := <-pr.done:
		if why != litenet.ReasonRemote {
			t.Fatalf("refused peer ended %v, want the relay's Disconnect", why)
		}
	case <-tctx(t).Done():
		t.Fatal("the refused peer was never disconnected")
	}
}

// A relay whose UDP port is taken fails to start, and says so each time:
// the UDP metrics it registered before binding are taken out again, so a
// second Start does not fail on a duplicate registration instead.
func TestUDPBindFailureUnregistersMetrics(t *testing.T) {
	taken := startRelay(t, Options{})
	s, err := New(Options{Secret: testSecret, ListenHost: "127.0.0.1", UDPPortV2: udpPortOf(t, taken), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		err := s.Start()
		if err == nil || !strings.Contains(err.Error(), "UDP port") {
			t.Fatalf("start %d: %v, want the UDP port's error", i, err)
		}
	}
}

// TestUDPOnIPv6Loopback: a relay told to bind its UDP socket to an IPv6
// address serves LiteNetLib there.
func TestUDPOnIPv6Loopback(t *testing.T) {
	s := startRelay(t, Options{UDPHost: "::1"})
	if ap, err := netip.ParseAddrPort(s.UDPAddr()); err != nil || ap.Addr() != netip.MustParseAddr("::1") {
		t.Fatalf("UDP bound at %s, want [::1]", s.UDPAddr())
	}
	hs, cs := mustAllocate(t, s, "v6")
	h := udpHost(t, s, "v6", hs, false)
	_ = udpClient(t, s, "v6", cs, false)
	if p, err := h.Next(tctx(t)); err != nil || p.Type != wire.ToHostConnected {
		t.Fatalf("host over [::1]: %v %v, want the client's connect notice", p, err)
	}
}

// TestCloseDoesNotWaitForASilentUDPPeer: a UDP peer that answers nothing
// (its disconnect never acknowledged) holds Close up for the session grace
// at most, not for its own timeout.
func TestCloseDoesNotWaitForASilentUDPPeer(t *testing.T) {
	s := startRelay(t, Options{UDPTimeout: 60 * time.Second})
	hs, _ := mustAllocate(t, s, "silent")
	p := newRawUDP(t, netip.MustParseAddrPort(s.UDPAddr()), 100)
	p.auth("silent", hs, wire.Authenticated) // then it reads and answers nothing
	start := time.Now()                      // wall clock: Close's session grace bounds real sockets
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > sessionGrace+3*time.Second {
		t.Fatalf("Close took %v with a silent UDP peer, want about the session grace (%v)", d, sessionGrace)
	}
}

// TestUDPMetricsCount: the UDP endpoint's counters reach /metrics (the
// socket's figures are published after each write batch: polled).
func TestUDPMetricsCount(t *testing.T) {
	s := startRelay(t, Options{})
	hs, _ := mustAllocate(t, s, "counted")
	p := newRawUDP(t, netip.MustParseAddrPort(s.UDPAddr()), 100)
	p.auth("counted", hs, wire.Authenticated)
	metric := func(name string) float64 {
		resp, err := http.Get(s.HTTPURL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		return 0
	}
	for _, name := range []string{"purrfly_relay_udp_datagrams_received_total", "purrfly_relay_udp_datagrams_sent_total"} {
		waitFor(t, name+" to count the connect", func() bool { return metric(name) >= 1 })
	}
}
