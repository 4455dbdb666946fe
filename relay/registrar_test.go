package relay

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// startRegistered starts a relay on a fake clock against a fake balancer
// and waits for its first heartbeat and snapshot.
func startRegistered(t *testing.T) (*Server, *fakeBalancer, *clock.Fake) {
	t.Helper()
	fb := newFakeBalancer(t)
	fake := clock.NewFake(time.Unix(2_000_000, 0))
	// The host window is set past the tests' horizon: they follow rooms
	// that are allocated and never hosted through the empty-room timeout.
	s := startRelay(t, Options{BalancerURL: fb.srv.URL, Clock: fake, Region: "ams", BootID: "relay-boot-1",
		HeartbeatInterval: 30 * time.Second, EmptyRoomTimeout: 300 * time.Second, HostConnectTimeout: time.Hour})
	waitFor(t, "first heartbeat", func() bool { return s.reg.beats.Load() == 1 })
	waitFor(t, "tickers armed", func() bool { return fake.Waiters() >= 2 })
	return s, fb, fake
}

// beat advances the fake clock by one heartbeat interval and waits until
// the relay has completed that heartbeat.
func beat(t *testing.T, s *Server, fake *clock.Fake) {
	t.Helper()
	n := s.reg.beats.Load()
	fake.Advance(30 * time.Second)
	waitFor(t, "heartbeat", func() bool { return s.reg.beats.Load() > n })
}

func TestRegistrationHeartbeatAndSnapshot(t *testing.T) {
	s, fb, fake := startRegistered(t)
	c := fb.counts()
	if c.registers != 1 || c.publishes != 1 {
		t.Fatalf("start: %+v, want one register and one snapshot", c)
	}
	reg := fb.lastRegister()
	info := reg.Relay
	if info.BootID != "relay-boot-1" || info.Region != "ams" || info.Host != "127.0.0.1" ||
		info.Endpoint != s.HTTPURL() || info.Port == 0 || info.UDPPortV2 != udpPortOf(t, s) || reg.Draining {
		t.Fatalf("register %+v", reg)
	}
	if reg.HeartbeatSeconds != 30 { // the balancer expires it after 3 of them at the least
		t.Fatalf("register reports a %d s heartbeat, want 30", reg.HeartbeatSeconds)
	}
	fb.mu.Lock()
	proof := fb.pingProofs[0]
	fb.mu.Unlock()
	if !proof {
		t.Fatal("the balancer could not prove the boot id at the endpoint during the first heartbeat")
	}
	if snap := fb.lastPublish(); !snap.Snapshot || len(snap.Rooms) != 0 || snap.BootID != "relay-boot-1" {
		t.Fatalf("first snapshot %+v", snap)
	}

	// A room and a host: the count change is published promptly, without
	// waiting for the heartbeat, with the next revision.
	hs, _ := mustAllocate(t, s, "room")
	host := join(t, s, "room", hs)
	waitFor(t, "count publication", func() bool { return fb.counts().publishes == 2 })
	pub := fb.lastPublish()
	if pub.Snapshot || len(pub.Rooms) != 1 || pub.Rooms[0].Revision != 2 || pub.Rooms[0].Connections != 1 {
		t.Fatalf("count publication %+v", pub)
	}
	epoch := pub.Rooms[0].Epoch

	// The heartbeat republishes the whole snapshot with the same epoch and
	// revision (idempotent at the balancer).
	beat(t, s, fake)
	snap := fb.lastPublish()
	if !snap.Snapshot || len(snap.Rooms) != 1 || snap.Rooms[0].Epoch != epoch || snap.Rooms[0].Revision != 2 {
		t.Fatalf("snapshot %+v", snap)
	}
	if r := fb.lastRegister(); r.Rooms != 1 || r.Connections != 1 {
		t.Fatalf("heartbeat counts %+v", r)
	}
	_ = host
}

func TestUnregisterOutboxRetriedUntilConfirmed(t *testing.T) {
	s, fb, fake := startRegistered(t)
	// The first send fails (503), the second is answered "retry"; only the
	// third, "applied", confirms.
	fb.mu.Lock()
	fb.unregOutcomes = []wire.RemovalStatus{"", wire.RemRetry, wire.RemApplied}
	fb.mu.Unlock()

	hs, _ := mustAllocate(t, s, "room")
	host := join(t, s, "room", hs)
	_ = host.WS.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "first unregister", func() bool { return fb.counts().unregisters >= 1 })
	rem := fb.lastUnregister().Rooms
	if len(rem) != 1 || rem[0].Name != "room" || rem[0].Revision != 3 {
		t.Fatalf("unregister %+v, want room at revision 3 (create 1, host 2, removal 3)", rem)
	}
	// Heartbeats retry until the balancer confirms.
	for i := 0; s.reg.outboxLen() > 0; i++ {
		if i == 5 {
			t.Fatal("outbox never confirmed")
		}
		beat(t, s, fake)
	}
	fb.mu.Lock()
	sent := append([]wire.UnregisterRequest(nil), fb.unregisters...)
	fb.mu.Unlock()
	if len(sent) != 3 {
		t.Fatalf("%d unregister requests, want 3 (503, retry, applied)", len(sent))
	}
	for _, u := range sent {
		if len(u.Rooms) != 1 || u.Rooms[0] != rem[0] {
			t.Fatalf("retry sent %+v, want the same entry %+v", u.Rooms, rem[0])
		}
	}
	if snap := fb.lastPublish(); !snap.Snapshot || len(snap.Rooms) != 0 {
		t.Fatalf("snapshot after removal %+v", snap)
	}
	// Confirmed entries are not sent again.
	n := fb.counts().unregisters
	beat(t, s, fake)
	if fb.counts().unregisters != n {
		t.Fatal("a confirmed removal was sent again")
	}
}

func TestRepublishOnBalancerRestart(t *testing.T) {
	s, fb, fake := startRegistered(t)
	hs, cs := mustAllocate(t, s, "room")
	idle, _ := mustAllocate(t, s, "idle") // never joined: expires 300 s after creation
	_ = idle
	join(t, s, "room", hs)
	waitFor(t, "count publication", func() bool { return fb.counts().publishes == 2 })

	// The balancer restarts (new boot, forgets us). The next count change is
	// rejected, which makes the relay register again at once and republish
	// the whole snapshot, without waiting for the 30 s heartbeat.
	fake.Advance(5 * time.Second)
	fb.restart("balancer-2")
	join(t, s, "room", cs)
	waitFor(t, "re-registration", func() bool { return fb.counts().registers == 2 })
	waitFor(t, "snapshot after restart", func() bool {
		p := fb.lastPublish()
		return p.Snapshot && len(p.Rooms) == 2
	})
	for _, p := range fb.lastPublish().Rooms {
		if p.Name == "room" && (p.Connections != 2 || p.Revision != 3) {
			t.Fatalf("republished %+v", p)
		}
	}

	// A heartbeat that reports a new balancer boot republishes too, and
	// republishing never resets the empty room's expiry: "idle" still
	// expires 300 s after its creation.
	fb.restart("balancer-3")
	fake.Advance(25 * time.Second) // t = 30 s: heartbeat
	waitFor(t, "heartbeat to the new boot", func() bool { return fb.counts().registers == 3 })
	fake.Advance(245 * time.Second) // t = 275 s
	if s.core.Room("idle") == nil {
		t.Fatal("idle room expired early")
	}
	fake.Advance(30 * time.Second) // t = 305 s: cleanup tick at 300 s
	waitFor(t, "idle room expired on time", func() bool { return s.core.Room("idle") == nil })
	if s.core.Room("room") == nil {
		t.Fatal("a busy room expired")
	}
}

func TestShutdownDrainsAndTellsTheBalancer(t *testing.T) {
	fb := newFakeBalancer(t)
	s := startRelay(t, Options{BalancerURL: fb.srv.URL, DrainTimeout: 200 * time.Millisecond})
	waitFor(t, "first heartbeat", func() bool { return fb.counts().publishes >= 1 })
	host, client, _ := hostWithClient(t, s, "room")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()

	// While draining: /ping says so and new rooms are refused.
	waitFor(t, "draining heartbeat", func() bool { return fb.lastRegister().Draining })
	if _, status, _ := allocate(t, s, "late", "x"); status != 503 {
		t.Fatalf("allocate while draining: %d", status)
	}
	// After the drain deadline every WebSocket is closed with 1012.
	for _, p := range []*wstest.Peer{host, client} {
		if code := p.Closed(); code != websocket.StatusServiceRestart {
			t.Fatalf("close status %v, want 1012", code)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// The remaining room (its host left with a client present) was released.
	if u := fb.lastUnregister(); len(u.Rooms) != 1 || u.Rooms[0].Name != "room" {
		t.Fatalf("final unregister %+v", u)
	}
}

// A registration the balancer refuses (it cannot reach the relay yet, as on
// Fly before the relay's checks pass) is retried after 250 ms, then 500 ms,
// not a whole heartbeat later.
func TestRegistrationRetriesSoonerThanHeartbeat(t *testing.T) {
	fb := newFakeBalancer(t)
	fb.refuseRegisters = 2
	fake := clock.NewFake(time.Unix(2_000_000, 0))
	s := startRelay(t, Options{BalancerURL: fb.srv.URL, Clock: fake, Region: "ams",
		HeartbeatInterval: 30 * time.Second})
	waitFor(t, "first refused heartbeat", func() bool { return s.reg.beats.Load() == 1 })
	if c := fb.counts(); c.registers != 1 || c.publishes != 0 {
		t.Fatalf("after a refusal: %+v, want one register and no publication", c)
	}
	waitFor(t, "retry timer armed", func() bool { return fake.Waiters() >= 3 })
	fake.Advance(250 * time.Millisecond)
	waitFor(t, "second refused heartbeat", func() bool { return s.reg.beats.Load() == 2 })
	waitFor(t, "retry timer re-armed", func() bool { return fake.Waiters() >= 3 })
	fake.Advance(250 * time.Millisecond)
	if s.reg.beats.Load() != 2 {
		t.Fatal("the second retry came before its doubled delay")
	}
	fake.Advance(250 * time.Millisecond)
	waitFor(t, "accepted heartbeat", func() bool { return fb.counts().publishes == 1 })
	if c := fb.counts(); c.registers != 3 {
		t.Fatalf("%+v, want three registers", c)
	}
}

// TestBalancerRequestResults: every request to the balancer is counted by
// operation and result, so an operator sees refused heartbeats.
func TestBalancerRequestResults(t *testing.T) {
	s, fb, fake := startRegistered(t)
	reqs := func(result string) float64 {
		return counterValue(s.reg.m.balancerReqs.WithLabelValues("register", result))
	}
	if ok, bad := reqs("ok"), reqs("error"); ok != 1 || bad != 0 {
		t.Fatalf("after one accepted heartbeat: ok %v, error %v", ok, bad)
	}
	fb.mu.Lock()
	fb.refuseRegisters = 1
	fb.mu.Unlock()
	beat(t, s, fake)
	if bad := reqs("error"); bad != 1 {
		t.Fatalf("after one refused heartbeat: error %v, want 1", bad)
	}
}

// TestRefusedCredentialHoldsPublications: once the balancer refuses the
// relay's credential (its SECRET changed, or the address is throttled),
// room changes send nothing until a heartbeat is accepted again, so a
// relay with a stale SECRET fails at the heartbeat's backoff and not once
// per room change; the accepted heartbeat then publishes every room.
func TestRefusedCredentialHoldsPublications(t *testing.T) {
	s, fb, fake := startRegistered(t)
	fb.mu.Lock()
	fb.refuseAll = true
	fb.mu.Unlock()
	beat(t, s, fake)
	refused := fb.counts()
	fb.mu.Lock()
	bad := fb.badRequests
	fb.mu.Unlock()
	if bad != 1 {
		t.Fatalf("%d refused requests after one refused heartbeat, want 1", bad)
	}
	for i := range 5 {
		name := "held-" + string(rune('a'+i))
		hs, _ := mustAllocate(t, s, name)
		join(t, s, name, hs) // a host: the count changes
		waitFor(t, "the room change handled", func() bool {
			handled := false
			s.reg.do(t.Context(), nil, func(context.Context) { handled = len(s.reg.kick) == 0 })
			return handled
		})
	}
	fb.mu.Lock()
	bad = fb.badRequests
	fb.refuseAll = false
	fb.mu.Unlock()
	if bad != 1 {
		t.Fatalf("five room changes under a refused credential sent %d more requests, want none", bad-1)
	}
	if c := fb.counts(); c != refused {
		t.Fatalf("requests reached the balancer while it refused the credential: %+v, then %+v", refused, c)
	}
	fake.Advance(30 * time.Second) // the retry (capped at the interval) or the tick
	waitFor(t, "the accepted heartbeat publishes every room", func() bool {
		p := fb.lastPublish()
		return fb.counts().publishes > refused.publishes && len(p.Rooms) == 5
	})
}
