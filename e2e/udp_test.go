package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/udptest"
	"github.com/purrfly/purrfly/wire"
)

// The protocol suite over UDP (LiteNetLib 2.x, as PurrNet's desktop,
// mobile and Editor builds connect) and over mixed rooms: a host and
// clients on either transport in one room.

// transports is every pairing of host and client transports.
var transports = []struct {
	name         string
	host, client client.Transport
}{
	{"udp-host/udp-client", client.TransportUDP, client.TransportUDP},
	{"udp-host/ws-client", client.TransportUDP, client.TransportWebSocket},
	{"ws-host/udp-client", client.TransportWebSocket, client.TransportUDP},
	{"ws-host/ws-client", client.TransportWebSocket, client.TransportWebSocket},
}

func dialOpts(tr client.Transport) *client.DialOptions {
	return &client.DialOptions{Transport: tr}
}

// allocHostOn allocates name and connects its host over tr.
func allocHostOn(t testing.TB, s *stack, tr client.Transport, name string) *open {
	t.Helper()
	c, err := s.api.Allocate(tctx(t), "eu", name, client.NewAllocationID())
	if err != nil {
		t.Fatalf("allocate %s: %v", name, err)
	}
	h, err := client.DialHost(tctx(t), c, name, dialOpts(tr))
	if err != nil {
		t.Fatalf("host of %s over %v: %v", name, tr, err)
	}
	t.Cleanup(func() { _ = h.CloseNow() })
	return &open{name: name, hostCap: c, host: h}
}

// joinOn joins name and connects a client over tr.
func joinOn(t testing.TB, s *stack, tr client.Transport, name string) *client.Client {
	t.Helper()
	c, err := s.api.Join(tctx(t), name)
	if err != nil {
		t.Fatalf("join %s: %v", name, err)
	}
	cl, err := client.DialClient(tctx(t), c, name, dialOpts(tr))
	if err != nil {
		t.Fatalf("client of %s over %v: %v", name, tr, err)
	}
	t.Cleanup(func() { _ = cl.CloseNow() })
	return cl
}

// methodsFor are the delivery methods a pairing carries: every one when
// both ends are UDP; over WebSocket everything is reliable and ordered.
var allMethods = []wire.Delivery{wire.ReliableOrdered, wire.ReliableUnordered, wire.Sequenced, wire.ReliableSequenced, wire.Unreliable}

// TestUDPRoomsEveryTransportAndMethod: in every pairing, the host learns of
// the client ([0][id]), data goes both ways with each delivery method (a
// UDP receiver gets it with the sender's method), 5,000-byte messages are
// fragmented and reassembled both ways, and the client's leave reaches the
// host ([1][id]).
func TestUDPRoomsEveryTransportAndMethod(t *testing.T) {
	s := startDev(t, nil, "eu")
	for i, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			name := fmt.Sprintf("udp-suite-%d", i)
			o := allocHostOn(t, s, tr.host, name)
			cl := joinOn(t, s, tr.client, name)
			id := expectConnected(t, o.host)[0]
			for _, d := range allMethods {
				msg := []byte(fmt.Sprintf("c2h-%d", d))
				if err := cl.SendWith(tctx(t), d, msg); err != nil {
					t.Fatal(err)
				}
				p, got, err := o.host.NextWith(tctx(t))
				if err != nil {
					t.Fatal(err)
				}
				if p.Type != wire.ToHostData || p.IDs[0] != id || !bytes.Equal(p.Payload, msg) {
					t.Fatalf("host got %+v, want data %q from %d", p, msg, id)
				}
				if tr.host == client.TransportUDP && tr.client == client.TransportUDP && got != d {
					t.Fatalf("host got %q with method %d, want %d", msg, got, d)
				}
				back := []byte(fmt.Sprintf("h2c-%d", d))
				if err := o.host.SendOneWith(tctx(t), id, d, back); err != nil {
					t.Fatal(err)
				}
				gotD, b, err := cl.RecvWith(tctx(t))
				if err != nil || !bytes.Equal(b, back) {
					t.Fatalf("client got %q (%v), want %q", b, err, back)
				}
				if tr.host == client.TransportUDP && tr.client == client.TransportUDP && gotD != d {
					t.Fatalf("client got %q with method %d, want %d", back, gotD, d)
				}
			}
			for _, d := range []wire.Delivery{wire.ReliableOrdered, wire.ReliableUnordered} {
				big := bytes.Repeat([]byte{byte(d), 0x5a}, 2500)
				if err := cl.SendWith(tctx(t), d, big); err != nil {
					t.Fatal(err)
				}
				expectData(t, o.host, id, big)
				if err := o.host.SendOneWith(tctx(t), id, d, big); err != nil {
					t.Fatal(err)
				}
				if got := recv(t, cl); !bytes.Equal(got, big) {
					t.Fatalf("client got %d bytes, want the 5,000-byte message", len(got))
				}
			}
			if err := cl.Close(); err != nil {
				t.Fatal(err)
			}
			expectDisconnected(t, o.host, id)
		})
	}
}

// TestUDPAuthFailedAndKick: a wrong secret over UDP gets [4] and the
// connection ends; a kicked UDP client is disconnected and the host hears
// [1][id]; the host leaving disconnects its UDP clients.
func TestUDPAuthFailedAndKick(t *testing.T) {
	s := startDev(t, nil, "eu")
	o := allocHostOn(t, s, client.TransportUDP, "udp-kick")
	bad := o.hostCap
	bad.Secret = "not-the-secret"
	if _, err := client.DialClient(tctx(t), bad, "udp-kick", dialOpts(client.TransportUDP)); !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("wrong secret over UDP: %v, want ErrAuthFailed", err)
	}
	a := joinOn(t, s, client.TransportUDP, "udp-kick")
	ida := expectConnected(t, o.host)[0]
	b := joinOn(t, s, client.TransportUDP, "udp-kick")
	idb := expectConnected(t, o.host)[0]
	if err := o.host.Kick(tctx(t), ida); err != nil {
		t.Fatal(err)
	}
	expectDisconnected(t, o.host, ida)
	if _, err := a.Recv(tctx(t)); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("kicked client: %v, want ErrDisconnected", err)
	}
	roundTrip(t, o.host, b, idb, "still-here")
	if err := o.host.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recv(tctx(t)); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("client after its host left: %v, want ErrDisconnected", err)
	}
}

// TestUDPThroughLossyNetwork: a UDP client behind 10% loss, duplicates and
// reordering plays with its host through the relay: every ReliableOrdered
// message arrives, in order, both ways, and every ReliableUnordered one
// exactly once.
func TestUDPThroughLossyNetwork(t *testing.T) {
	s := startDev(t, nil, "eu")
	o := allocHostOn(t, s, client.TransportUDP, "lossy")
	jc, err := s.api.Join(tctx(t), "lossy")
	if err != nil {
		t.Fatal(err)
	}
	proxy := udptest.NewLossyProxy(t, netip.MustParseAddrPort(s.relays[0].UDPAddr()), 0.10, 0.05, 0.10)
	cl, err := client.DialClient(tctx(t), jc, "lossy", &client.DialOptions{Transport: client.TransportUDP, UDPAddr: proxy.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseNow()
	id := expectConnected(t, o.host)[0]
	const n = 300
	for i := range n {
		if err := cl.SendWith(tctx(t), wire.ReliableOrdered, fmt.Appendf(nil, "ro-%04d", i)); err != nil {
			t.Fatal(err)
		}
		if err := cl.SendWith(tctx(t), wire.ReliableUnordered, fmt.Appendf(nil, "ru-%04d", i)); err != nil {
			t.Fatal(err)
		}
		if err := o.host.SendOneWith(tctx(t), id, wire.ReliableOrdered, fmt.Appendf(nil, "down-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	nextRO, ru := 0, map[string]bool{}
	for nextRO < n || len(ru) < n {
		p := next(t, o.host)
		switch s := string(p.Payload); {
		case p.Type != wire.ToHostData:
			t.Fatalf("host got packet type %d", p.Type)
		case s[:3] == "ro-":
			if want := fmt.Sprintf("ro-%04d", nextRO); s != want {
				t.Fatalf("host got %s, want %s (order)", s, want)
			}
			nextRO++
		default:
			if ru[s] {
				t.Fatalf("host got %s twice", s)
			}
			ru[s] = true
		}
	}
	for i := range n {
		if got, want := string(recv(t, cl)), fmt.Sprintf("down-%04d", i); got != want {
			t.Fatalf("client got %s, want %s (order)", got, want)
		}
	}
}

// TestUDPPipesLateHostAndLimits: pipe mode over UDP and mixed with
// WebSocket ([method][target][data] in, [sender][data] out with the same
// method); a UDP host that logs in after its clients gets [3] then one
// [0][ids] packet; a UDP client's one-byte packet is dropped; the client
// refuses a packet past 65,535 bytes (relay/udp_test.go: the relay ends a
// peer that sends one).
func TestUDPPipesLateHostAndLimits(t *testing.T) {
	s := startDev(t, nil, "eu")
	r := s.relays[0]
	up, err := client.DialPipe(tctx(t), "", &client.DialOptions{Transport: client.TransportUDP, UDPAddr: r.UDPAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer up.CloseNow()
	wp, err := client.DialPipe(tctx(t), r.WSURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wp.CloseNow()
	if err := up.SendWith(tctx(t), wp.ID(), wire.Unreliable, []byte("to-ws")); err != nil {
		t.Fatal(err)
	}
	if from, data, err := wp.Recv(tctx(t)); err != nil || from != up.ID() || string(data) != "to-ws" {
		t.Fatalf("ws pipe got %d %q %v", from, data, err)
	}
	if err := wp.Send(tctx(t), up.ID(), []byte("to-udp")); err != nil {
		t.Fatal(err)
	}
	if from, data, err := up.Recv(tctx(t)); err != nil || from != wp.ID() || string(data) != "to-udp" {
		t.Fatalf("udp pipe got %d %q %v", from, data, err)
	}

	c, err := s.api.Allocate(tctx(t), "eu", "udp-late", client.NewAllocationID())
	if err != nil {
		t.Fatal(err)
	}
	a := joinOn(t, s, client.TransportUDP, "udp-late")
	b := joinOn(t, s, client.TransportWebSocket, "udp-late")
	h, err := client.DialHost(tctx(t), c, "udp-late", dialOpts(client.TransportUDP))
	if err != nil {
		t.Fatal(err)
	}
	defer h.CloseNow()
	ids := expectConnected(t, h)
	if len(ids) != 2 {
		t.Fatalf("late UDP host got %v, want both clients in one packet", ids)
	}
	if err := a.SendWith(tctx(t), wire.ReliableOrdered, nil); err != nil { // [2] alone: one byte
		t.Fatal(err)
	}
	if err := b.Send(tctx(t), []byte("ws")); err != nil {
		t.Fatal(err)
	}
	if p := next(t, h); p.Type != wire.ToHostData || string(p.Payload) != "ws" {
		t.Fatalf("host got %+v, want the WebSocket client's packet only", p)
	}
	if err := a.SendWith(tctx(t), wire.ReliableOrdered, make([]byte, wire.MaxMessageSize)); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("a 65,536-byte UDP packet: %v, want ErrTooLarge before sending", err)
	}
}
