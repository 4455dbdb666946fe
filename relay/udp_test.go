package relay

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// udpCap is a capability of relay s over UDP for secret.
func udpCap(s *Server, secret string) (wire.Capability, *client.DialOptions) {
	return wire.Capability{Host: "127.0.0.1", Port: 1, UDPPortV2: 1, Secret: secret},
		&client.DialOptions{Transport: client.TransportUDP, UDPAddr: s.UDPAddr()}
}

func tctx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// udpHost connects the host of room over UDP.
func udpHost(tb testing.TB, s *Server, room, secret string, nat bool) *client.Host {
	tb.Helper()
	c, o := udpCap(s, secret)
	o.NAT = nat
	h, err := client.DialHost(tctx(tb), c, room, o)
	if err != nil {
		tb.Fatalf("UDP host: %v", err)
	}
	tb.Cleanup(func() { _ = h.CloseNow() })
	return h
}

// udpClient connects a client of room over UDP.
func udpClient(tb testing.TB, s *Server, room, secret string, nat bool) *client.Client {
	tb.Helper()
	c, o := udpCap(s, secret)
	o.NAT = nat
	cl, err := client.DialClient(tctx(tb), c, room, o)
	if err != nil {
		tb.Fatalf("UDP client: %v", err)
	}
	tb.Cleanup(func() { _ = cl.CloseNow() })
	return cl
}

// NAT introduction (docs/UDP.md): when host and client both ask for it, each
// gets the same [6][token] (the host before the client's connect notice,
// the client before [3]); their introduce requests, from their own relay
// sockets, are answered with each other's addresses. A stranger with the
// token gets nothing; without nat on both sides nobody gets [6].
func TestUDPNATIntroduction(t *testing.T) {
	s := startRelay(t, Options{})
	hs, cs := mustAllocate(t, s, "nat-room")
	h := udpHost(t, s, "nat-room", hs, true)
	cl := udpClient(t, s, "nat-room", cs, true)
	token := cl.NATToken()
	p, err := h.Next(tctx(t))
	if err != nil || p.Type != wire.ToHostNATIntroduce || string(p.Payload) != token || token == "" {
		t.Fatalf("host's first packet %+v (%v), want [6] with the client's token %q", p, err, token)
	}
	p, err = h.Next(tctx(t))
	if err != nil || p.Type != wire.ToHostConnected {
		t.Fatalf("host's second packet %+v (%v), want the connect notice", p, err)
	}
	if !strings.HasSuffix(token, "_"+itoa(int(p.IDs[0]))) {
		t.Fatalf("token %q does not end with the client id %d", token, p.IDs[0])
	}

	// A stranger holding the token is ignored.
	stranger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	relayAddr := netip.MustParseAddrPort(s.UDPAddr())
	_, _ = stranger.WriteToUDPAddrPort(litenet.AppendNatRequest(nil, netip.MustParseAddrPort("10.0.0.9:9"), token), relayAddr)

	type result struct {
		n   litenet.NatPacket
		err error
	}
	hc, cc := make(chan result, 1), make(chan result, 1)
	go func() { n, err := h.NATIntroduce(tctx(t), token); hc <- result{n, err} }()
	go func() { n, err := cl.NATIntroduce(tctx(t)); cc <- result{n, err} }()
	hr, cr := <-hc, <-cc
	if hr.err != nil || cr.err != nil {
		t.Fatalf("introductions: host %v, client %v", hr.err, cr.err)
	}
	if hr.n.External == cr.n.External || hr.n.External.Addr() != relayAddr.Addr() {
		t.Fatalf("host was introduced to %v, client to %v", hr.n.External, cr.n.External)
	}
	_ = stranger.SetReadDeadline(time.Now().Add(200 * time.Millisecond)) // wall clock: a bound on a real socket
	if n, _, err := stranger.ReadFromUDPAddrPort(make([]byte, 512)); err == nil {
		t.Fatalf("a stranger with the token got %d bytes", n)
	}

	// Without nat on the client: no [6] on either side.
	plain := udpClient(t, s, "nat-room", cs, false)
	if plain.NATToken() != "" {
		t.Fatal("a client without nat got a token")
	}
	if p, err := h.Next(tctx(t)); err != nil || p.Type != wire.ToHostConnected {
		t.Fatalf("host got %+v (%v), want only the connect notice", p, err)
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for n > 0 || i == len(b) {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// Frames too long for their method: an Unreliable one is dropped and
// counted, a ReliableSequenced one goes ReliableOrdered; a packet without a
// valid delivery method byte is dropped; the peers stay.
func TestUDPFramesTooLongForTheirMethod(t *testing.T) {
	s := startRelay(t, Options{})
	hs, cs := mustAllocate(t, s, "sizes")
	h := udpHost(t, s, "sizes", hs, false)
	cl := udpClient(t, s, "sizes", cs, false)
	id := nextOfType(t, h, wire.ToHostConnected).IDs[0]

	// [4][1022 bytes] fits one Unreliable packet; [2][id][1022 bytes] does not.
	if err := cl.SendWith(tctx(t), wire.Unreliable, make([]byte, litenet.MaxUnreliablePayload-1)); err != nil {
		t.Fatal(err)
	}
	// Nothing reaches the host for it, so the count is the sign. (Sent
	// together with what follows, LiteNetLib puts the reliable packet
	// first: the host could see it before the relay reads this one.)
	waitFor(t, "the too-long Unreliable frame counted", func() bool { return drops(t, s, core.DropTooLargeForUDP) == 1 })
	// [3][1019 bytes] fits one ReliableSequenced packet; the host's frame
	// does not, so it goes ReliableOrdered.
	rs := make([]byte, litenet.MaxChanneledPayload-1)
	rs[0] = 'r'
	if err := cl.SendWith(tctx(t), wire.ReliableSequenced, rs); err != nil {
		t.Fatal(err)
	}
	p, d, err := h.NextWith(tctx(t))
	if err != nil || p.Type != wire.ToHostData || p.Payload[0] != 'r' || len(p.Payload) != len(rs) {
		t.Fatalf("host got %+v (%v), want the ReliableSequenced frame", p, err)
	}
	if d != wire.ReliableOrdered {
		t.Fatalf("the too-long ReliableSequenced frame came with method %d, want ReliableOrdered", d)
	}
	if got := drops(t, s, core.DropTooLargeForUDP); got != 1 {
		t.Fatalf("too_large_for_udp drops %v, want 1", got)
	}
	// A method byte that is no method.
	if err := cl.WriteRawWith(tctx(t), wire.ReliableOrdered, []byte{9, 'x', 'y'}); err != nil {
		t.Fatal(err)
	}
	if err := cl.SendWith(tctx(t), wire.ReliableOrdered, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if p := nextOfType(t, h, wire.ToHostData); string(p.Payload) != "after" || p.IDs[0] != id {
		t.Fatalf("host got %+v", p)
	}
	if got := drops(t, s, core.DropBadMethod); got != 1 {
		t.Fatalf("bad_method drops %v, want 1", got)
	}
}

func nextOfType(t testing.TB, h *client.Host, typ byte) wire.ToHostPacket {
	t.Helper()
	p, err := h.Next(tctx(t))
	if err != nil || p.Type != typ {
		t.Fatalf("host got %+v (%v), want type %d", p, err, typ)
	}
	return p
}

// A UDP peer that never authenticates is dropped after the authentication
// timeout, and a relay that shuts down disconnects its UDP peers.
func TestUDPAuthTimeoutAndShutdown(t *testing.T) {
	s := startRelay(t, Options{DrainTimeout: -1, AuthTimeout: 200 * time.Millisecond})
	ctx := tctx(t)
	silent := &probe{done: make(chan litenet.Reason, 1)}
	// It pings (so the relay knows it is there) but never authenticates.
	ep, _, err := litenet.Dial(ctx, netip.MustParseAddrPort(s.UDPAddr()), "PurrNet",
		litenet.Config{Handler: silent, PingInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	select {
	case why := <-silent.done:
		if why != litenet.ReasonRemote {
			t.Fatalf("silent peer ended %v, want the relay's Disconnect", why)
		}
	case <-ctx.Done():
		t.Fatal("a peer that never authenticated was kept")
	}
	waitFor(t, "the auth timeout counted", func() bool { return disconnects(t, s, core.ReasonAuthTimeout) == 1 })

	hs, cs := mustAllocate(t, s, "bye")
	h := udpHost(t, s, "bye", hs, false)
	cl := udpClient(t, s, "bye", cs, false)
	nextOfType(t, h, wire.ToHostConnected)
	go func() { _ = s.Shutdown(context.Background()) }()
	if _, err := cl.Recv(tctx(t)); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("client after shutdown: %v", err)
	}
	if _, err := h.Next(tctx(t)); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("host after shutdown: %v", err)
	}
}

// probe is a litenet Handler that only reports how the peer ended.
type probe struct{ done chan litenet.Reason }

func (p *probe) Connected(*litenet.Peer) bool { return true }

func (p *probe) Receive(*litenet.Peer, litenet.Method, []byte) {}

func (p *probe) Flush(*litenet.Peer) bool { return false }

func (p *probe) Disconnected(_ *litenet.Peer, why litenet.Reason) {
	select {
	case p.done <- why:
	default:
	}
}

func (p *probe) Nat(netip.AddrPort, litenet.NatPacket) {}

// rawUDP is a hand-made LiteNetLib peer on a plain socket, for measuring
// the relay alone: it allocates nothing itself.
// It writes and reads packets in litenet's (2.x) numbering and speaks v
// on the wire.
type rawUDP struct {
	tb    testing.TB
	c     *net.UDPConn
	relay netip.AddrPort
	buf   []byte
	v     litenet.Version
	pong  [11]byte // the answer to a ping, built in place
}

func newRawUDP(tb testing.TB, relay netip.AddrPort, connectTime int64) *rawUDP {
	tb.Helper()
	return newRawUDPV(tb, relay, connectTime, litenet.V2)
}

func newRawUDPV(tb testing.TB, relay netip.AddrPort, connectTime int64, v litenet.Version) *rawUDP {
	tb.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		bye := litenet.AppendDisconnect(nil, 0, connectTime)
		litenet.ToWire(v, bye)
		_, _ = c.WriteToUDPAddrPort(bye, relay)
		c.Close()
	})
	// One deadline for the whole test: setting one per read would allocate.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // wall clock: a bound on a real socket
	r := &rawUDP{tb: tb, c: c, relay: relay, buf: make([]byte, 2048), v: v}
	r.send(litenet.AppendConnectRequest(nil, 0, connectTime, 1, relay, "PurrNet"))
	if b := r.read(); len(b) != 15 || litenet.Property(b[0]) != litenet.PropConnectAccept {
		tb.Fatalf("accept %x", b)
	}
	return r
}

// send writes b, renumbered for the wire and back (no copy: b is the
// caller's again when it returns).
func (r *rawUDP) send(b []byte) {
	r.tb.Helper()
	litenet.ToWire(r.v, b)
	_, err := r.c.WriteToUDPAddrPort(b, r.relay)
	litenet.FromWire(r.v, b)
	if err != nil {
		r.tb.Fatal(err)
	}
}

func (r *rawUDP) read() []byte {
	r.tb.Helper()
	n, _, err := r.c.ReadFromUDPAddrPort(r.buf)
	if err != nil {
		r.tb.Fatal(err)
	}
	litenet.FromWire(r.v, r.buf[:n])
	r.answerPings(r.buf[:n])
	return r.buf[:n]
}

// answerPings answers every ping in b with its pong, as a LiteNetLib
// client does: the first proves the address receives, without which the
// relay sends it no more than it sent (litenet's reflection bound).
func (r *rawUDP) answerPings(b []byte) {
	pong := func(p []byte) {
		if len(p) == 3 && litenet.Property(p[0]&0x1f) == litenet.PropPing {
			r.pong[0] = byte(litenet.PropPong) | p[0]&0x60
			r.pong[1], r.pong[2] = p[1], p[2]
			r.send(r.pong[:])
		}
	}
	if len(b) == 0 || litenet.Property(b[0]&0x1f) != litenet.PropMerged {
		pong(b)
		return
	}
	for pos := 1; pos+2 <= len(b); {
		n := int(b[pos]) | int(b[pos+1])<<8
		pos += 2
		if n == 0 || pos+n > len(b) {
			return
		}
		pong(b[pos : pos+n])
		pos += n
	}
}

// auth sends the authentication message (ReliableOrdered, sequence 0) and
// acknowledges the relay's reliable packets until one holds want.
func (r *rawUDP) auth(room, secret string, want byte) {
	r.tb.Helper()
	msg := client.AuthMessage(room, secret, false)
	p := []byte{byte(litenet.PropReliableMerged), 0, 0, byte(litenet.ReliableOrdered), byte(len(msg)), byte(len(msg) >> 8)}
	if r.v == litenet.V1 { // no ReliableMerged: a Channeled packet of its own
		p = []byte{byte(litenet.PropChanneled), 0, 0, byte(litenet.ReliableOrdered)}
	}
	r.send(append(p, msg...))
	r.expectReliable(want)
}

// expectReliable acknowledges every reliable packet of the relay (one ack
// of the whole window) until a reliable message starting with want
// arrives (in ReliableMerged over 2.x, a Channeled packet over 1.x).
func (r *rawUDP) expectReliable(want byte) {
	r.tb.Helper()
	for {
		for _, p := range litenet.Packets(r.read()) {
			at := 6
			switch {
			case litenet.Property(p[0]&0x1f) == litenet.PropReliableMerged:
			case p[0] == byte(litenet.PropChanneled) && (p[3] == byte(litenet.ReliableOrdered) || p[3] == byte(litenet.ReliableUnordered)):
				at = 4
			default:
				continue
			}
			ack := make([]byte, 13)
			ack[0], ack[3] = byte(litenet.PropAck), p[3]
			for i := range 8 {
				ack[4+i] = 0xff
			}
			r.send(ack)
			if len(p) > at && p[at] == want {
				return
			}
		}
	}
}

// The UDP forwarding path allocates nothing: a client's Unreliable packet
// read by the relay's socket, routed to the host, packed and written, end
// to end on real sockets.
func TestUDPForwardingAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	for _, v := range []litenet.Version{litenet.V2, litenet.V1} {
		t.Run(v.String(), func(t *testing.T) { udpForwardingAllocs(t, v) })
	}
}

func udpForwardingAllocs(t *testing.T, v litenet.Version) {
	// A short flush delay: the path with one allocates nothing either, and
	// 1,200 round trips do not wait 10 ms each.
	s := startRelay(t, Options{UDPFlush: time.Millisecond})
	hs, cs := mustAllocate(t, s, "udp-allocs")
	relayAddr := netip.MustParseAddrPort(s.UDPAddr())
	if v == litenet.V1 {
		relayAddr = netip.MustParseAddrPort(s.UDP1Addr())
	}
	host := newRawUDPV(t, relayAddr, 100, v)
	host.auth("udp-allocs", hs, wire.Authenticated)
	cl := newRawUDPV(t, relayAddr, 200, v)
	cl.auth("udp-allocs", cs, wire.Authenticated)
	host.expectReliable(wire.ToHostConnected)

	// [Unreliable][method 4][payload] in, [Unreliable][2][id:4][payload] out,
	// alone or merged with a ping ([Merged]([len:2][packet])*).
	msg := append([]byte{byte(litenet.PropUnreliable), byte(wire.Unreliable)}, make([]byte, 100)...)
	forwarded := func(p []byte) bool {
		return len(p) == 1+5+100 && litenet.Property(p[0]&0x1f) == litenet.PropUnreliable && p[1] == wire.ToHostData
	}
	run := func() {
		cl.send(msg)
		for {
			b := host.read()
			if forwarded(b) {
				return
			}
			for b[0] == byte(litenet.PropMerged) && len(b) >= 3 {
				n := int(b[1]) | int(b[2])<<8
				if 3+n > len(b) {
					break
				}
				if forwarded(b[3 : 3+n]) {
					return
				}
				b = append(b[:1], b[3+n:]...) // drop the packet, keep the header
			}
		}
	}
	for range 200 {
		run()
	}
	if n := testing.AllocsPerRun(1000, run); n > 0 {
		t.Fatalf("%.2f allocations per forwarded datagram", n)
	}
}

// A UDP peer that sends a frame past 65,535 bytes (a message, reassembled
// from fragments, of its delivery method and the frame) is disconnected,
// counted as message_too_big, like a WebSocket peer closed with 1009. A
// frame of 65,535 bytes is within the limit: as over WebSocket, it is too
// long to reach the host with the relay's header, and only dropped.
func TestUDPMessageTooBigEndsPeer(t *testing.T) {
	s := startRelay(t, Options{})
	hs, cs := mustAllocate(t, s, "too-big")
	udpHost(t, s, "too-big", hs, false)
	p := &probe{done: make(chan litenet.Reason, 1)}
	ep, peer, err := litenet.Dial(tctx(t), netip.MustParseAddrPort(s.UDPAddr()), "PurrNet",
		litenet.Config{Handler: p, MaxMessage: 80 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	_ = peer.Send(litenet.ReliableOrdered, client.AuthMessage("too-big", cs, false))
	_ = peer.Send(litenet.ReliableOrdered, append([]byte{byte(wire.ReliableOrdered)}, make([]byte, wire.MaxMessageSize)...))
	waitFor(t, "too_large_for_host counted", func() bool { return drops(t, s, core.DropTooLargeForHost) == 1 })
	if err := peer.Send(litenet.ReliableOrdered, make([]byte, 1+wire.MaxMessageSize+1)); err != nil {
		t.Fatal(err)
	}
	select {
	case why := <-p.done:
		if why != litenet.ReasonRemote {
			t.Fatalf("peer ended %v, want the relay's Disconnect", why)
		}
	case <-tctx(t).Done():
		t.Fatal("the relay kept a peer that sent a 65,536-byte frame")
	}
	waitFor(t, "message_too_big counted", func() bool { return disconnects(t, s, core.ReasonTooBig) == 1 })
}

// TestUDPFramesAtTheirMethodsLimit: a frame of exactly the longest size
// one packet of its method carries goes with that method, neither
// dropped nor moved to ReliableOrdered.
func TestUDPFramesAtTheirMethodsLimit(t *testing.T) {
	s := startRelay(t, Options{})
	hs, cs := mustAllocate(t, s, "limits")
	h := udpHost(t, s, "limits", hs, false)
	cl := udpClient(t, s, "limits", cs, false)
	nextOfType(t, h, wire.ToHostConnected)
	for _, tc := range []struct {
		d   wire.Delivery
		max int
	}{
		{wire.Unreliable, litenet.MaxUnreliablePayload},
		{wire.ReliableSequenced, litenet.MaxChanneledPayload},
	} {
		payload := make([]byte, tc.max-5) // the host's frame is [2][sender:4][payload]
		payload[0] = byte(tc.d) + 'a'
		if err := cl.SendWith(tctx(t), tc.d, payload); err != nil {
			t.Fatal(err)
		}
		p, d, err := h.NextWith(tctx(t))
		if err != nil || p.Type != wire.ToHostData || len(p.Payload) != len(payload) || p.Payload[0] != payload[0] || d != tc.d {
			t.Fatalf("a %d-byte frame sent %v reached the host as %d bytes %v (%v)", tc.max, tc.d, len(p.Payload), d, err)
		}
	}
	if got := drops(t, s, core.DropTooLargeForUDP); got != 0 {
		t.Fatalf("too_large_for_udp drops %v, want 0", got)
	}
}
