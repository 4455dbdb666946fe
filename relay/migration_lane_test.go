package relay

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// Every successful claim gives the room a new host credential, and that
// credential activates one host connection only.
func TestMigrationHostCredentialSingleActivation(t *testing.T) {
	m := newMigRoom(t, "single", Options{})
	h := join(t, m.s, m.name, m.hostSecret)
	second := wstest.Dial(t, m.s.WSURL())
	if got := second.Auth(m.name, m.hostSecret); got != wire.AuthFailed {
		t.Fatalf("a second host socket with the allocation's credential: %d", got)
	}
	cl := join(t, m.s, m.name, m.clientSecret)
	h.ExpectToHost(wire.ToHostConnected)
	_ = h.WS.Close(websocket.StatusNormalClosure, "")
	cl.Closed()
	waitFor(t, "vacant", func() bool { return m.s.Stats().Connections == 0 })
	again := wstest.Dial(t, m.s.WSURL())
	if got := again.Auth(m.name, m.hostSecret); got != wire.AuthFailed {
		t.Fatalf("the spent credential after its host left: %d", got)
	}

	c := m.mustClaim("c1", 0, "8", "")
	join(t, m.s, m.name, c.Secret)
	dup := wstest.Dial(t, m.s.WSURL())
	if got := dup.Auth(m.name, c.Secret); got != wire.AuthFailed {
		t.Fatalf("a second provisional host socket: %d", got)
	}
}

// The provisional host lane. While the new host is provisional, its own
// local client authenticates with the claimed host credential
// (provisionalHostSecret), and the relay lets exactly one such lane in,
// with that credential unexpired. Ordinary clients that authenticate
// during the lease neither see the provisional host nor have their
// traffic forwarded until activation, and one that slipped in while the
// lease was pending is closed, to come back through the active host.
func TestMigrationLeaseIsolatesOrdinaryClients(t *testing.T) {
	m := newVacantRoom(t, "lane", Options{})
	c := m.mustClaim("c1", 0, "8", "")
	host := join(t, m.s, m.name, c.Secret)
	lane := provisional(t, m.s, m.name, m.clientSecret, c.Secret)
	laneID := host.ExpectToHost(wire.ToHostConnected).IDs[0]

	ordinary := join(t, m.s, m.name, m.clientSecret)
	second := provisional(t, m.s, m.name, m.clientSecret, c.Secret) // a second lane: isolated
	ordinary.Send([]byte("hello host"))
	second.Send([]byte("me too"))
	waitFor(t, "isolated packets dropped", func() bool { return drops(t, m.s, core.DropIsolated) == 2 })

	// The lane and the provisional host talk; nothing of the isolated
	// clients reached the host before this.
	lane.Send([]byte("from the lane"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != laneID || string(p.Payload) != "from the lane" {
		t.Fatalf("host got %+v", p)
	}
	host.Send(sendOne(laneID, "to the lane"))
	if b := lane.Recv(); string(b) != "to the lane" {
		t.Fatalf("lane got %q", b)
	}

	if _, e := m.activate(c); e != nil {
		t.Fatalf("activate: %v", e)
	}
	for i, p := range []*wstest.Peer{ordinary, second} {
		if code := p.Closed(); code != websocket.StatusServiceRestart {
			t.Fatalf("isolated client %d closed with %v, want 1012 (reconnect)", i, code)
		}
	}
	// They reconnect through the normal path to the active host.
	back := join(t, m.s, m.name, m.clientSecret)
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	back.Send([]byte("rejoined"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != id || string(p.Payload) != "rejoined" {
		t.Fatalf("host got %+v", p)
	}
	lane.Send([]byte("still here"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != laneID {
		t.Fatalf("the lane after activation: %+v", p)
	}
}

// A room waiting for its new host stays reserved until that host connects
// or the empty-room timeout ends it: no allocation can take the name from
// a recovery under way.
func TestMigrationReservedRoom(t *testing.T) {
	m := newVacantRoom(t, "reserved", Options{EmptyRoomTimeout: 10 * time.Minute})
	c := m.mustClaim("c1", 0, "8", "")
	if _, status, e := allocate(t, m.s, m.name, "another-play"); status != http.StatusConflict || e.Code != wire.ErrRoomTaken.Code {
		t.Fatalf("allocation over a pending claim: %d %v", status, e)
	}
	m.clk.Advance(2 * DefaultActivationLease) // expired, still reserved
	if _, status, _ := allocate(t, m.s, m.name, "another-play"); status != http.StatusConflict {
		t.Fatalf("allocation over an expired claim: %d", status)
	}
	// A vacant room after a migration stays reserved for recovery too.
	m2 := newVacantRoom(t, "reserved-2", Options{})
	c2 := m2.mustClaim("c1", 0, "8", "")
	h := join(t, m2.s, m2.name, c2.Secret)
	_ = h.WS.CloseNow()
	waitFor(t, "vacant again", func() bool { st, _ := m2.current(m2.clientSecret); return st.HostPhase == wire.HostPhaseVacant })
	if _, status, _ := allocate(t, m2.s, m2.name, "another-play"); status != http.StatusConflict {
		t.Fatalf("allocation over a migrated vacant room: %d", status)
	}
	// The empty-room timeout ends the reservation.
	_ = c
	m.clk.Advance(10 * time.Minute)
	waitFor(t, "the room expired", func() bool { return m.s.Stats().Rooms == 0 })
	if _, status, e := allocate(t, m.s, m.name, "another-play"); status != http.StatusOK {
		t.Fatalf("allocation after the empty-room timeout: %d %v", status, e)
	}
}

// Both transports: the promoted host and its listen-client over UDP, an
// ordinary WebSocket client isolated, then every old-generation socket of
// both transports closed by the next claim.
func TestMigrationOverUDP(t *testing.T) { migrationOverUDP(t, udpCap) }

// TestMigrationOverUDP1: the same with the promoted host and its lane on
// LiteNetLib 1.x (an older PurrNet build).
func TestMigrationOverUDP1(t *testing.T) { migrationOverUDP(t, udp1Cap) }

func migrationOverUDP(t *testing.T, udpCap func(*Server, string) (wire.Capability, *client.DialOptions)) {
	// The relay's fake clock drives its LiteNetLib side too: no flush
	// delay to wait out, and no UDP timeout within the test's minutes.
	m := newVacantRoom(t, "udp-mig", Options{UDPFlush: -1, UDPTimeout: time.Hour})
	c := m.mustClaim("c1", 0, "8", "")
	capab, opts := udpCap(m.s, c.Secret)
	host, err := client.DialHost(tctx(t), capab, m.name, opts)
	if err != nil {
		t.Fatalf("provisional UDP host: %v", err)
	}
	defer host.CloseNow()
	lcap, lopts := udpCap(m.s, m.clientSecret)
	lopts.ProvisionalHostSecret = c.Secret
	lane, err := client.DialClient(tctx(t), lcap, m.name, lopts)
	if err != nil {
		t.Fatalf("UDP lane: %v", err)
	}
	defer lane.CloseNow()
	laneID := nextOfType(t, host, wire.ToHostConnected).IDs[0]
	ws := join(t, m.s, m.name, m.clientSecret) // isolated
	if err := lane.SendWith(tctx(t), wire.ReliableOrdered, []byte("lane")); err != nil {
		t.Fatal(err)
	}
	if p := nextOfType(t, host, wire.ToHostData); p.IDs[0] != laneID {
		t.Fatalf("host got %+v", p)
	}
	// The provisional host never activates; the lease runs out and a peer
	// claims again: every socket of generation 1 goes.
	m.clk.Advance(DefaultActivationLease)
	m.mustClaim("c2", 1, "9", "")
	if _, err := host.Next(tctx(t)); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("the fenced UDP host: %v, want disconnected", err)
	}
	if _, err := lane.Recv(tctx(t)); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("the fenced UDP lane: %v, want disconnected", err)
	}
	if code := ws.Closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("the isolated WebSocket client closed with %v", code)
	}
}

// An active host that leaves a room nobody else is in ends the game, at
// any generation; a provisional host that leaves (before it activated)
// keeps the room vacant for its players to claim again.
func TestMigrationActiveHostLeavingEmptyRoomEndsIt(t *testing.T) {
	m := newVacantRoom(t, "end", Options{})
	c := m.mustClaim("c1", 0, "8", "")
	h := join(t, m.s, m.name, c.Secret)
	if _, e := m.activate(c); e != nil {
		t.Fatal(e)
	}
	_ = h.WS.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the room gone", func() bool { return m.s.Stats().Rooms == 0 })
}

// "A room in a migration phase never moves": the promoted host that
// reaches another machine of the app is forwarded to the room's machine
// (no handover), and so is its listen-client.
func TestMeshRoomInMigrationDoesNotMove(t *testing.T) {
	mr := newMeshRoom(t)
	r := mr.holder.core.Room("room")
	epoch := r.Epoch()
	m := &migRoom{t: t, s: mr.holder, name: "room", hostSecret: mr.hostSecret, clientSecret: mr.clientSecr, epoch: epoch}
	st, e := m.current(m.clientSecret)
	if e != nil {
		t.Fatal(e)
	}
	m.incarnation = st.Incarnation
	m.vacate()
	c := m.mustClaim("c1", 0, "8", "")
	host := join(t, mr.edge, "room", c.Secret)
	lane := provisional(t, mr.edge, "room", mr.clientSecr, c.Secret)
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	lane.Send([]byte("through the mesh"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != id {
		t.Fatalf("host got %+v", p)
	}
	if mr.edge.Stats().Rooms != 0 || mr.holder.Stats().Rooms != 1 {
		t.Fatalf("edge %+v, holder %+v: the room moved during its migration", mr.edge.Stats(), mr.holder.Stats())
	}
	if _, e := m.activate(c); e != nil {
		t.Fatalf("activate through the holder: %v", e)
	}
}

// TestMigrationLaneThatLeavesCanReturn: the promoted player's
// listen-client that drops before activation may come back as the lane;
// a room keeps no claim on a lane that left.
func TestMigrationLaneThatLeavesCanReturn(t *testing.T) {
	m := newVacantRoom(t, "lane-again", Options{})
	c := m.mustClaim("c1", 0, "8", "")
	host := join(t, m.s, m.name, c.Secret)
	lane := provisional(t, m.s, m.name, m.clientSecret, c.Secret)
	host.ExpectToHost(wire.ToHostConnected)
	_ = lane.WS.Close(websocket.StatusNormalClosure, "")
	host.ExpectToHost(wire.ToHostDisconnected)
	again := provisional(t, m.s, m.name, m.clientSecret, c.Secret)
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	again.Send([]byte("lane again"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != id || string(p.Payload) != "lane again" {
		t.Fatalf("the returning lane's packet: %+v (it was isolated?)", p)
	}
}
