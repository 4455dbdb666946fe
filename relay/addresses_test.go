package relay

import (
	"net"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// TestAdvertisedAddresses: a relay bound to every interface (or to no
// host given) advertises 127.0.0.1, not the wildcard, unless told its
// public host; a machine of a multi-machine app registers its own bound
// address as its endpoint, the public host when it binds a wildcard.
func TestAdvertisedAddresses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		listen, public string
		multi          bool
		wantHost       string
		wantEndpoint   string
	}{
		{"", "", false, "127.0.0.1", "127.0.0.1"},
		{"0.0.0.0", "", false, "127.0.0.1", "127.0.0.1"},
		{"::", "", false, "127.0.0.1", "127.0.0.1"},
		{"127.0.0.7", "", false, "127.0.0.7", "127.0.0.7"},
		{"0.0.0.0", "relay.example", false, "relay.example", "relay.example"},
		{"127.0.0.7", "app.example", true, "app.example", "127.0.0.7"},
		{"::", "app.example", true, "app.example", "app.example"},
	} {
		o := Options{Secret: "s", ListenHost: tc.listen, PublicHost: tc.public, MultiMachine: tc.multi}
		if tc.multi {
			o.BalancerURL = "http://balancer.invalid"
		}
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		s.httpLn = ln
		s.completeAddresses(s.advertisedAddrs())
		want := "http://" + net.JoinHostPort(tc.wantEndpoint, itoa(port))
		if s.opts.PublicHost != tc.wantHost || s.opts.Endpoint != want {
			t.Errorf("listen %q public %q multi %v: advertises %q at %q, want %q at %q",
				tc.listen, tc.public, tc.multi, s.opts.PublicHost, s.opts.Endpoint, tc.wantHost, want)
		}
	}
}

// TestCleanupWithoutUDP: a relay that serves no UDP (UDP_PORT_V2=-1)
// still runs its cleanup: empty rooms expire.
func TestCleanupWithoutUDP(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	s := startRelay(t, Options{Clock: fake, UDPPortV2: -1, EmptyRoomTimeout: 60 * time.Second})
	waitFor(t, "cleanup ticker", func() bool { return fake.Waiters() >= 1 })
	mustAllocate(t, s, "idle")
	fake.Advance(DefaultCleanupInterval * 3)
	waitFor(t, "the idle room to expire", func() bool { return s.core.Room("idle") == nil })
}
