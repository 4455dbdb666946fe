package litenet

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
)

// Seed corpora: every datagram of the real session (docs/LITENETLIB-VECTORS.md),
// plus the corpus files under testdata/fuzz. `go test -fuzz=FuzzX` runs one
// target longer; CI runs each for a few seconds (.ci/run).

func captureSeeds(f *testing.F, toServer bool) {
	for _, c := range readCapture(f) {
		if c.toServer == toServer {
			f.Add(c.b)
		}
	}
}

func FuzzParseConnectRequest(f *testing.F) {
	captureSeeds(f, true)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseConnectRequest(b)
		if err != nil {
			return
		}
		if _, err := r.Key(); err != nil {
			return
		}
		// What parses re-encodes to a request that parses the same.
		key, _ := r.Key()
		again, err := ParseConnectRequest(AppendConnectRequest(nil, r.ConnNum, r.ConnectTime, r.PeerID, r.Target, string(key)))
		if err != nil || again.ConnectTime != r.ConnectTime || again.PeerID != r.PeerID || again.Target != r.Target {
			t.Fatalf("round trip: %+v vs %+v (%v)", again, r, err)
		}
	})
}

func FuzzParseConnectAccept(f *testing.F) {
	captureSeeds(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseConnectAccept(b)
		if err != nil {
			return
		}
		// Byte 0's connection-number bits are not part of an accept.
		if got := AppendConnectAccept(nil, a.ConnectTime, a.ConnNum, a.PeerID); !a.Reused && !bytes.Equal(got[1:], b[1:]) {
			t.Fatalf("round trip %x vs %x", got, b)
		}
	})
}

func FuzzParseNat(f *testing.F) {
	in := netip.MustParseAddrPort("192.0.2.2:5000")
	ex := netip.MustParseAddrPort("[2001:db8::1]:6000")
	f.Add(AppendNatRequest(nil, in, "1_abcdef_7"))
	f.Add(AppendNatResponse(nil, in, ex, []byte("tok")))
	f.Add(AppendNatPunch(nil, "tok", true))
	f.Add(append(AppendNatPunch(nil, "a", false), AppendNatRequest(nil, ex, "b")[1:]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ParseNat(b, func(n NatPacket) {
			if n.Kind < NatRequest || n.Kind > NatPunch || len(n.Token) > 4*MaxNatToken {
				t.Fatalf("bad packet %+v", n)
			}
		})
	})
}

// FuzzServerDatagram feeds arbitrary datagrams from a connected client's
// address to a server: nothing panics, and a malformed datagram never ends
// the connection (only Disconnect, PeerNotFound 1 or a message past
// MaxMessage may).
func FuzzServerDatagram(f *testing.F) {
	captureSeeds(f, true)
	s, addr, ticks := steadyServer(f)
	for _, tick := range ticks[:4] {
		f.Add(tick)
	}
	var left []gone
	f.Fuzz(func(t *testing.T, b []byte) {
		s.flushMu.Lock()
		defer s.flushMu.Unlock()
		now := s.e.now()
		if s.e.peers.get(addr) == nil { // reconnect after a fuzzed Disconnect
			s.handle(addr, connectRequest(0, now+1, "PurrNet"), now)
			s.handle(addr, []byte{byte(PropUnreliable), 0}, now)
		}
		s.handle(addr, b, now)
		left = s.flushLocked(now, left[:0])
	})
}

// FuzzClientDatagram feeds arbitrary datagrams from the server's address to
// a connected client.
func FuzzClientDatagram(f *testing.F) {
	captureSeeds(f, false)
	// The "server" is a raw socket that accepts and then stays silent, so
	// that only the fuzzer feeds the client; the client's clock stands
	// still, so none of its timers runs.
	srv := newRaw(f, netipLoop(9))
	type dialed struct {
		e   *Endpoint
		p   *Peer
		err error
	}
	got := make(chan dialed, 1)
	go func() {
		ce, p, err := Dial(context.Background(), srv.addr(), "PurrNet", Config{Handler: echoHandler{}, Clock: fakeClock()})
		got <- dialed{ce, p, err}
	}()
	buf := make([]byte, 256)
	n, client, err := srv.c.ReadFromUDPAddrPort(buf)
	if err != nil {
		f.Fatal(err)
	}
	req, err := ParseConnectRequest(buf[:n])
	if err != nil {
		f.Fatal(err)
	}
	if _, err := srv.c.WriteToUDPAddrPort(AppendConnectAccept(nil, req.ConnectTime, 0, 0), client); err != nil {
		f.Fatal(err)
	}
	d := <-got
	if d.err != nil {
		f.Fatal(d.err)
	}
	ce, p := d.e, d.p
	f.Cleanup(func() { ce.Close() })
	s := ce.socks[0]
	var left []gone
	f.Fuzz(func(t *testing.T, b []byte) {
		s.flushMu.Lock()
		defer s.flushMu.Unlock()
		now := ce.now()
		s.handle(p.addr, b, now)
		left = s.flushLocked(now, left[:0])
	})
}
