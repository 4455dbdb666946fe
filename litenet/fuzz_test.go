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

func captureSeeds(f *testing.F, toServer bool) { captureSeedsV(f, V2, toServer) }

// captureSeedsV seeds with the datagrams of v's capture, as on the wire.
func captureSeedsV(f *testing.F, v Version, toServer bool) {
	caps := readCapture(f)
	if v == V1 {
		caps = readCapture1(f)
	}
	for _, c := range caps {
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
func FuzzServerDatagram(f *testing.F) { fuzzServerDatagram(f, V2) }

// FuzzServerDatagram1 is FuzzServerDatagram for a 1.x server: every
// datagram is renumbered before the engine reads it.
func FuzzServerDatagram1(f *testing.F) { fuzzServerDatagram(f, V1) }

func fuzzServerDatagram(f *testing.F, v Version) {
	captureSeedsV(f, v, true)
	s, addr, ticks := steadyServerV(f, v)
	for _, tick := range ticks[:4] {
		f.Add(tick)
	}
	var left []gone
	f.Fuzz(func(t *testing.T, b []byte) {
		s.flushMu.Lock()
		defer s.flushMu.Unlock()
		now := s.e.now()
		if s.e.peers.get(addr) == nil { // reconnect after a fuzzed Disconnect
			req := connectRequest(0, now+1, "PurrNet")
			ToWire(v, req)
			s.handle(addr, req, now)
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

// FuzzWireRenumbering: renumbering a 1.x datagram for the engine and back
// gives it back whenever every property it names exists in 1.x, and an
// unknown one always reads as invalid; neither walk leaves the datagram.
func FuzzWireRenumbering(f *testing.F) {
	captureSeedsV(f, V1, true)
	captureSeedsV(f, V1, false)
	f.Add([]byte{0x0c, 3, 0, 0x12, 1, 2, 0, 0})
	f.Fuzz(func(t *testing.T, wire []byte) {
		b := append([]byte(nil), wire...)
		FromWire(V1, b)
		valid := true
		for i := range b {
			if b[i] != wire[i] && b[i]&0x1f == 0x1f {
				valid = false
			}
		}
		if len(b) > 0 && wire[0]&0x1f >= 18 && b[0]&0x1f != 0x1f {
			t.Fatalf("1.x property %d read as %d", wire[0]&0x1f, b[0]&0x1f)
		}
		if len(b) > 0 && Property(b[0]&0x1f) == PropReliableMerged {
			t.Fatalf("%x reads as ReliableMerged", wire)
		}
		ToWire(V1, b)
		if valid && !bytes.Equal(b, wire) {
			t.Fatalf("%x came back as %x", wire, b)
		}
	})
}
