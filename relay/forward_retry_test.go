package relay

import (
	"net"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// TestForwardTriesAStaleHolderTwice: a holder that cannot be dialed may
// be a stale answer, so the edge forgets it and looks the room up once
// more, then gives up: two lookups, an answer [4] at once, not a retry
// loop until ForwardTimeout.
func TestForwardTriesAStaleHolderTwice(t *testing.T) {
	b := newMeshBalancer(t)
	edge := startMachine(t, b, "edge")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	b.mu.Lock()
	b.rooms["stale"] = wire.RoomLocation{Name: "stale", BootID: "dead-boot", MachineID: "dead", Endpoint: dead,
		Host: "app.test", Port: 443, Region: "ams"}
	before := b.lookups
	b.mu.Unlock()

	p := wstest.Dial(t, edge.WSURL())
	start := time.Now() // wall clock: ForwardTimeout bounds real dials on the wall clock
	if got := p.Auth("stale", "whatever"); got != wire.AuthFailed {
		t.Fatalf("auth reply %d, want [4]", got)
	}
	if d := time.Since(start); d >= edge.opts.ForwardTimeout {
		t.Fatalf("answered after %v, the whole forward timeout", d)
	}
	b.mu.Lock()
	n := b.lookups - before
	b.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d lookups of a room whose holder is gone, want 2 (the answer, then once more)", n)
	}
	if v := counterValue(edge.mesh.m.forwards.WithLabelValues("unreachable")); v != 1 {
		t.Fatalf("forwards unreachable = %v, want 1", v)
	}
}

// TestMeshForwardsAUDPPeer: a UDP player that reaches a machine without
// its room is carried to the holder over a link in UDP framing: the
// holder's frames arrive with their delivery method stripped and applied,
// and the player's reach the host with its own.
func TestMeshForwardsAUDPPeer(t *testing.T) {
	meshForwardsAUDPPeer(t, func(m *meshRoom) *client.Client { return udpClient(t, m.edge, "room", m.clientSecr, false) })
}

// TestMeshForwardsAUDP1Peer: the same for a LiteNetLib 1.x player.
func TestMeshForwardsAUDP1Peer(t *testing.T) {
	meshForwardsAUDPPeer(t, func(m *meshRoom) *client.Client {
		c, o := udp1Cap(m.edge, m.clientSecr)
		cl, err := client.DialClient(tctx(t), c, "room", o)
		if err != nil {
			t.Fatalf("1.x client: %v", err)
		}
		t.Cleanup(func() { _ = cl.CloseNow() })
		return cl
	})
}

func meshForwardsAUDPPeer(t *testing.T, dial func(*meshRoom) *client.Client) {
	m := newMeshRoom(t)
	host := join(t, m.holder, "room", m.hostSecret)
	cl := dial(&m)
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	host.Send(sendOne(id, "state"))
	d, got, err := cl.RecvWith(tctx(t))
	if err != nil || string(got) != "state" || d != wire.ReliableOrdered {
		t.Fatalf("forwarded UDP player got %q with %v (%v), want \"state\" reliable ordered", got, d, err)
	}
	if err := cl.SendWith(tctx(t), wire.Unreliable, []byte("input")); err != nil {
		t.Fatal(err)
	}
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != id || string(p.Payload) != "input" {
		t.Fatalf("host got %v", p)
	}
	if n := counterValue(m.edge.mesh.m.forwards.WithLabelValues("ok")); n != 1 {
		t.Fatalf("forwards ok = %v, want the UDP player's link", n)
	}
	if n := counterValue(m.holder.mesh.m.accepted); n != 1 {
		t.Fatalf("links accepted by the holder = %v, want 1", n)
	}
}

// TestForwardWaitsOutASwitchingBalancer: while the balancer does not
// answer (a restart, its standby and primary switching), a player reaching
// a machine without its room is not refused at once: the lookup is tried
// again within its authentication, and the player plays once the
// balancer answers.
func TestForwardWaitsOutASwitchingBalancer(t *testing.T) {
	m := newMeshRoom(t)
	host := join(t, m.holder, "room", m.hostSecret)
	m.edge.mesh.loc.forget("room")
	m.b.failLookups.Store(2)
	m.b.mu.Lock()
	before := m.b.lookups
	m.b.mu.Unlock()
	fwd := join(t, m.edge, "room", m.clientSecr) // forwarded after two failed lookups
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	host.Send(sendOne(id, "through"))
	if got := fwd.Recv(); !equal(got, "through") {
		t.Fatalf("forwarded client got %q", got)
	}
	m.b.mu.Lock()
	n := m.b.lookups - before
	m.b.mu.Unlock()
	if n != 3 {
		t.Fatalf("%d lookups, want 3 (two unanswered, then the location)", n)
	}
}
