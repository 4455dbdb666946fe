package relay

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// udp1Cap is a capability of relay s over LiteNetLib 1.x for secret.
func udp1Cap(s *Server, secret string) (wire.Capability, *client.DialOptions) {
	return wire.Capability{Host: "127.0.0.1", Port: 1, UDPPort: 1, UDPPortV2: 1, Secret: secret},
		&client.DialOptions{Transport: client.TransportUDP1, UDPAddr: s.UDP1Addr()}
}

// A room mixing every kind of player: a 1.x host, a 1.x client, a 2.x
// client and a WebSocket client. Every delivery method goes both ways
// byte for byte between the host and each UDP client (a 5,000-byte
// fragmented ReliableOrdered message included), the WebSocket client
// plays too, the host kicks the 1.x client, the 2.x client leaves, and
// when the host leaves the others hear it.
func TestUDP1MixedRoom(t *testing.T) {
	s := startRelay(t, Options{})
	hs, cs := mustAllocate(t, s, "mixed")
	hc, ho := udp1Cap(s, hs)
	host, err := client.DialHost(tctx(t), hc, "mixed", ho)
	if err != nil {
		t.Fatalf("1.x host: %v", err)
	}
	defer host.CloseNow()
	c1c, c1o := udp1Cap(s, cs)
	c1, err := client.DialClient(tctx(t), c1c, "mixed", c1o)
	if err != nil {
		t.Fatalf("1.x client: %v", err)
	}
	defer c1.CloseNow()
	id1 := nextOfType(t, host, wire.ToHostConnected).IDs[0]
	c2 := udpClient(t, s, "mixed", cs, false)
	id2 := nextOfType(t, host, wire.ToHostConnected).IDs[0]
	ws := join(t, s, "mixed", cs)
	idWS := nextOfType(t, host, wire.ToHostConnected).IDs[0]

	big := make([]byte, 5000)
	for i := range big {
		big[i] = byte(i)
	}
	methods := []wire.Delivery{wire.ReliableOrdered, wire.ReliableUnordered, wire.Sequenced, wire.ReliableSequenced, wire.Unreliable}
	for _, pc := range []struct {
		name string
		c    *client.Client
		id   wire.ConnID
	}{{"1.x", c1, id1}, {"2.x", c2, id2}} {
		for i, d := range append(methods, wire.ReliableOrdered) {
			msg := []byte{byte(i), 'u', 'p', byte(d)}
			if i == len(methods) {
				msg = big
			}
			if err := pc.c.SendWith(tctx(t), d, msg); err != nil {
				t.Fatal(err)
			}
			p, got, err := host.NextWith(tctx(t))
			if err != nil || p.Type != wire.ToHostData || p.IDs[0] != pc.id || got != d || !bytes.Equal(p.Payload, msg) {
				t.Fatalf("%s client -> 1.x host, %v %d bytes: got %+v (%d bytes) by %v, %v", pc.name, d, len(msg), p.Type, len(p.Payload), got, err)
			}
			down := append([]byte("down"), msg...)
			if err := host.SendOneWith(tctx(t), pc.id, d, down); err != nil {
				t.Fatal(err)
			}
			gd, b, err := pc.c.RecvWith(tctx(t))
			if err != nil || gd != d || !bytes.Equal(b, down) {
				t.Fatalf("1.x host -> %s client, %v %d bytes: got %d bytes by %v, %v", pc.name, d, len(down), len(b), gd, err)
			}
		}
	}
	// The WebSocket client's message reaches the 1.x host and back.
	ws.Send([]byte("from ws"))
	if p := nextOfType(t, host, wire.ToHostData); p.IDs[0] != idWS || string(p.Payload) != "from ws" {
		t.Fatalf("host got %+v", p)
	}
	if err := host.SendOne(tctx(t), idWS, []byte("to ws")); err != nil {
		t.Fatal(err)
	}
	if b := ws.Recv(); string(b) != "to ws" {
		t.Fatalf("ws got %q", b)
	}

	// Kick: the 1.x client is disconnected, the host hears it left.
	if err := host.Kick(tctx(t), id1); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Recv(tctx(t)); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("kicked 1.x client: %v, want disconnected", err)
	}
	if p := nextOfType(t, host, wire.ToHostDisconnected); p.IDs[0] != id1 {
		t.Fatalf("disconnect notice for %d, want %d", p.IDs[0], id1)
	}
	// The 2.x client leaves.
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if p := nextOfType(t, host, wire.ToHostDisconnected); p.IDs[0] != id2 {
		t.Fatalf("disconnect notice for %d, want %d", p.IDs[0], id2)
	}
	// The 1.x host leaves: the WebSocket client hears "host left".
	start := time.Now() // wall clock: a graceful close waits for ShutdownOk
	if err := host.Close(); err != nil {
		t.Fatal(err)
	}
	if code := ws.Closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("client of a host that left: close %v", code)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the 1.x host's close took %v", d)
	}
	waitFor(t, "every connection to end", func() bool { return s.Stats().Connections == 0 })
}

// The relay advertises the 1.x port it serves in every answer, and the
// documented default when 1.x is off.
func TestUDP1PortAdvertised(t *testing.T) {
	s := startRelay(t, Options{})
	a, _, _ := allocate(t, s, "adv", "adv-1")
	if want := int(netip.MustParseAddrPort(s.UDP1Addr()).Port()); a.Capability.UDPPort != want || want == DefaultUDPPort {
		t.Fatalf("udpPort %d, want the bound %d", a.Capability.UDPPort, want)
	}
	off := startRelay(t, Options{UDPPort: -1})
	if off.UDP1Addr() != "" {
		t.Fatalf("1.x off but bound at %s", off.UDP1Addr())
	}
	if a, _, _ := allocate(t, off, "adv", "adv-2"); a.Capability.UDPPort != DefaultUDPPort {
		t.Fatalf("udpPort %d with 1.x off, want %d", a.Capability.UDPPort, DefaultUDPPort)
	}
}

// Each version's port refuses the other's clients as the real libraries
// do (InvalidProtocol, at once), and its own peers play on.
func TestUDPWrongVersionRefused(t *testing.T) {
	s := startRelay(t, Options{})
	for _, tc := range []struct {
		addr string
		v    litenet.Version
	}{{s.UDPAddr(), litenet.V1}, {s.UDP1Addr(), litenet.V2}} {
		p := &probe{done: make(chan litenet.Reason, 1)}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, _, err := litenet.Dial(ctx, netip.MustParseAddrPort(tc.addr), "PurrNet", litenet.Config{Handler: p, Version: tc.v})
		cancel()
		var de *litenet.DialError
		if !errors.As(err, &de) || de.Reason != litenet.ReasonInvalidProtocol {
			t.Fatalf("a %v client at %s: %v, want InvalidProtocol", tc.v, tc.addr, err)
		}
	}
	hs, cs := mustAllocate(t, s, "after")
	hc, ho := udp1Cap(s, hs)
	host, err := client.DialHost(tctx(t), hc, "after", ho)
	if err != nil {
		t.Fatal(err)
	}
	defer host.CloseNow()
	udpClient(t, s, "after", cs, false)
	nextOfType(t, host, wire.ToHostConnected)
}
