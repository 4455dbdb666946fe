package core

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// Routing rules of the core that no transport test pins down exactly,
// each exercised at the core as a transport's reader would.

func newTestCore(t *testing.T) *Core {
	t.Helper()
	return testCore(t, clock.Real{})
}

// feed hands msg to the core from cn, as a reader does.
func feed(c *Core, cn *Conn, msg []byte) {
	b := buf.Get(buf.Headroom + len(msg))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], msg)
	c.Handle(cn, b)
}

// feedUDP hands msg to the core from cn as the UDP transport does, its
// delivery method taken out first.
func feedUDP(c *Core, cn *Conn, msg []byte) {
	b := buf.Get(buf.Headroom + len(msg))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], msg)
	if unframeUDP(c, cn, b) {
		c.Handle(cn, b)
	}
}

// queued takes what is queued for cn: each frame's bytes and method.
func queuedFrames(cn *Conn) (frames [][]byte, methods []wire.Delivery) {
	for _, b := range cn.TakeBatch(nil) {
		frames = append(frames, append([]byte(nil), b.Frame()...))
		methods = append(methods, b.Method)
		buf.Put(b)
	}
	return frames, methods
}

func authMsg(t *testing.T, a wire.Auth) []byte {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUDPPipesCarryTheirMethod: a UDP pipe packet [method][target][data]
// reaches its target as [sender][data] sent with that method; a packet
// that is only a method byte is truncated, one with an unknown method is
// dropped as such, and neither reaches anyone.
func TestUDPPipesCarryTheirMethod(t *testing.T) {
	c := newTestCore(t)
	a, b := c.NewConn(nil), c.NewConn(nil)
	for _, p := range []*Conn{a, b} {
		feedUDP(c, p, []byte(`{"pipe":true}`))
		if f, _ := queuedFrames(p); len(f) != 1 || f[0][0] != wire.PipeAuthenticated {
			t.Fatalf("pipe authentication answered %v", f)
		}
	}
	feedUDP(c, a, wire.AppendPipeUDP(nil, wire.Unreliable, b.id, []byte("ping")))
	frames, methods := queuedFrames(b)
	if len(frames) != 1 || methods[0] != wire.Unreliable {
		t.Fatalf("target got %d frames, methods %v", len(frames), methods)
	}
	if from, data, err := wire.ParsePipe(frames[0]); err != nil || from != a.id || string(data) != "ping" {
		t.Fatalf("target got from %d %q (%v), want from %d \"ping\"", from, data, err, a.id)
	}
	truncated, badMethod := c.m.drops[DropTruncated], c.m.drops[DropBadMethod]
	t0, m0 := counterValue(truncated), counterValue(badMethod)
	feedUDP(c, a, []byte{byte(wire.ReliableOrdered)})
	if counterValue(truncated) != t0+1 || counterValue(badMethod) != m0 {
		t.Fatalf("a lone method byte: truncated +%v, bad method +%v; want a truncated packet", counterValue(truncated)-t0, counterValue(badMethod)-m0)
	}
	feedUDP(c, a, wire.AppendPipe([]byte{0xee}, b.id, []byte("x")))
	if counterValue(badMethod) != m0+1 {
		t.Fatal("an unknown method was not dropped as such")
	}
	if f, _ := queuedFrames(b); len(f) != 0 {
		t.Fatalf("malformed pipe packets reached the target: %v", f)
	}
}

// TestUDPHostSendOneAndKick: a UDP host's SEND_ONE carries a method byte
// after the target, which the client does not see; its KICK has none.
func TestUDPHostSendOneAndKick(t *testing.T) {
	c := newTestCore(t)
	cr := newCoreRoomFramed(t, c, "udp-host", true, false)
	feedUDP(c, cr.host, wire.AppendSendOneUDP(nil, cr.client.id, wire.Sequenced, []byte("state")))
	frames, methods := queuedFrames(cr.client)
	if len(frames) != 1 || string(frames[0]) != "state" || methods[0] != wire.Sequenced {
		t.Fatalf("client got %q with %v, want \"state\" sent sequenced", frames, methods)
	}
	feedUDP(c, cr.host, wire.AppendKick(nil, cr.client.id))
	if r := cr.client.CloseReason(); r != ReasonKicked {
		t.Fatalf("kicked client closed for %v", r)
	}
	if f, _ := queuedFrames(cr.host); len(f) != 1 || f[0][0] != wire.ToHostDisconnected {
		t.Fatalf("host got %v, want the disconnect notice", f)
	}
}

// TestLateHostGetsEveryClientID: a host that authenticates after 200
// clients (a 801-byte notice, past the smallest buffer) gets all their ids
// in one CONNECTED packet.
func TestLateHostGetsEveryClientID(t *testing.T) {
	c := newTestCore(t)
	al, err := c.Allocate("late", "id")
	if err != nil {
		t.Fatal(err)
	}
	var ids []wire.ConnID
	for range 200 {
		cl := c.NewConn(nil)
		feed(c, cl, authMsg(t, wire.Auth{RoomName: "late", ClientSecret: al.Pub.ClientSecret}))
		ids = append(ids, cl.id)
	}
	host := c.NewConn(nil)
	feed(c, host, authMsg(t, wire.Auth{RoomName: "late", ClientSecret: al.HostSecret}))
	frames, _ := queuedFrames(host)
	var got []wire.ConnID
	for _, f := range frames {
		if p, err := wire.ParseToHostPacket(f); err == nil && p.Type == wire.ToHostConnected {
			if got != nil {
				t.Fatal("the ids came in more than one packet")
			}
			got = p.IDs
		}
	}
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("late host got %d ids, want all %d", len(got), len(ids))
	}
}

// TestRoomClientCapIsExact: a room takes clients up to maxRoomClients
// (what one CONNECTED packet can list), players isolated by a migration
// included, and refuses the next.
func TestRoomClientCapIsExact(t *testing.T) {
	c := newTestCore(t)
	al, err := c.Allocate("full", "id")
	if err != nil {
		t.Fatal(err)
	}
	join := func() *Conn {
		cl := c.NewConn(nil)
		feed(c, cl, authMsg(t, wire.Auth{RoomName: "full", ClientSecret: al.Pub.ClientSecret}))
		cl.ReleaseQueue()
		return cl
	}
	var last *Conn
	for i := range maxRoomClients {
		if last = join(); last.role != RoleClient {
			t.Fatalf("client %d of %d refused", i+1, maxRoomClients)
		}
	}
	if cl := join(); cl.role == RoleClient || cl.CloseReason() != ReasonAuthFailed {
		t.Fatalf("client %d admitted (role %v)", maxRoomClients+1, cl.role)
	}
	// One of them isolated rather than a client still counts.
	r := c.rooms.get("full")
	r.mu.Lock()
	delete(r.clients, last.id)
	r.mig.isolated = map[wire.ConnID]*Conn{last.id: last}
	r.mu.Unlock()
	if cl := join(); cl.role == RoleClient {
		t.Fatal("a client was admitted while the room was full with an isolated player")
	}
}

// TestHostLeavingDuringShutdownSays1012: once the relay shuts down, a
// host that leaves ends its players with the restart reason (1012: come
// back), not "host left" (1000: the game is over).
func TestHostLeavingDuringShutdownSays1012(t *testing.T) {
	c := newTestCore(t)
	al, err := c.Allocate("stopping", "id")
	if err != nil {
		t.Fatal(err)
	}
	// Made, not published: closeAll does not reach them, as a host whose
	// reader ends before the shutdown reaches its conn.
	host, cl := c.MakeConn(nil), c.MakeConn(nil)
	feed(c, host, authMsg(t, wire.Auth{RoomName: "stopping", ClientSecret: al.HostSecret}))
	feed(c, cl, authMsg(t, wire.Auth{RoomName: "stopping", ClientSecret: al.Pub.ClientSecret}))
	c.CloseAll(ReasonShutdown)
	c.Leave(host)
	if r := cl.CloseReason(); r != ReasonShutdown {
		t.Fatalf("player of a host that left during shutdown closed for %v, want %v", r, ReasonShutdown)
	}
}

// TestEmptyRoomExpiresAtItsTimeout: an empty room is removed once it has
// been empty for exactly the empty-room timeout, not a sweep later.
func TestEmptyRoomExpiresAtItsTimeout(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	c := testCore(t, clk)
	c.hostWait = 10 * c.emptyTimeout // the room awaits its host: that window is TestUnhostedRoom's
	if _, err := c.Allocate("idle", "id"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(c.emptyTimeout - time.Nanosecond)
	c.Expire()
	if c.rooms.get("idle") == nil {
		t.Fatal("removed before its timeout")
	}
	clk.Advance(time.Nanosecond)
	c.Expire()
	if c.rooms.get("idle") != nil {
		t.Fatal("still there after exactly its timeout")
	}
}

// TestIsolatedPlayersKeepTheRoom: players isolated by a host migration
// count as the room's connections, so the room does not expire under them.
func TestIsolatedPlayersKeepTheRoom(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	c := testCore(t, clk)
	c.hostWait = 10 * c.emptyTimeout // the room awaits its host: that window is TestUnhostedRoom's
	if _, err := c.Allocate("migrating", "id"); err != nil {
		t.Fatal(err)
	}
	r := c.rooms.get("migrating")
	p := c.MakeConn(nil)
	r.mu.Lock()
	r.mig.isolated = map[wire.ConnID]*Conn{p.id: p}
	n := r.countLocked()
	r.mu.Unlock()
	if n != 1 {
		t.Fatalf("a room with one isolated player counts %d connections, want 1", n)
	}
	clk.Advance(2 * c.emptyTimeout)
	c.Expire()
	if c.rooms.get("migrating") == nil {
		t.Fatal("a room with an isolated player expired as empty")
	}
}

// testCore is a core on clk with its own metrics registry.
func testCore(tb testing.TB, clk clock.Clock) *Core {
	tb.Helper()
	c, err := New(Config{Clock: clk, Log: testLogger(), Metrics: prometheus.NewRegistry()})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
