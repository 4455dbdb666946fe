package balancer

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

func TestAllocateExactReplayAndJoin(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)

	c1, err := h.allocate("lobby", "eu", "alloc-1")
	noErr(t, err)
	// The relay's authoritative (registered) host replaces whatever it said.
	if c1.Host != "eu.relay.test" || c1.Secret == "" || c1.Port != 6942 || c1.UDPPortV2 != 7778 {
		t.Fatalf("capability %+v", c1)
	}
	if got, want := r.lastHint, wire.SessionID("lobby").Hint(); got != want {
		t.Fatalf("relay got routing hint %q, want %q", got, want)
	}
	c2, err := h.allocate("lobby", "eu", "alloc-1")
	noErr(t, err)
	if c1 != c2 {
		t.Fatalf("exact replay answered %+v, first answer %+v", c2, c1)
	}
	if n := r.roomCount(); n != 1 {
		t.Fatalf("relay holds %d rooms after a replay, want 1", n)
	}
	if n := r.allocCalls.Load(); n != 2 {
		t.Fatalf("relay asked %d times, want 2 (the replay is forwarded)", n)
	}

	j, err := h.join("lobby")
	noErr(t, err)
	if j.Host != "eu.relay.test" || j.Secret == c1.Secret || j.Secret == "" || j.Port != 6942 || j.UDPPortV2 != 7778 || j.UDPPort != 7777 {
		t.Fatalf("join answered %+v (host credential %q)", j, c1.Secret)
	}
	if l := h.list(0); l.Total != 1 || l.Results[0].Name != "lobby" {
		t.Fatalf("list %+v", l)
	}

	// Another allocation id cannot take the live room.
	_, err = h.allocate("lobby", "eu", "alloc-2")
	wantCode(t, err, wire.ErrRoomTaken.Code)
	if err.Status != http.StatusConflict {
		t.Fatalf("conflict status %d", err.Status)
	}
	_, err = h.join("nope")
	wantCode(t, err, wire.ErrRoomNotFound.Code)
}

func TestLegacyGetAllocate(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	st, body, _ := h.do(http.MethodGet, "/allocate_ws", map[string]string{"name": "old", "region": "eu"}, nil)
	var c wire.Capability
	noErr(t, decodeAnswer(t, st, body, &c))
	for _, field := range []string{`"ssl"`, `"secret"`, `"port"`, `"udpPort"`, `"udpPortV2"`} {
		if !contains(body, field) {
			t.Fatalf("legacy answer %s lacks %s", body, field)
		}
	}
	// A legacy retry has no allocation id to prove it is the same host.
	st, body, _ = h.do(http.MethodGet, "/allocate_ws", map[string]string{"name": "old", "region": "eu"}, nil)
	wantCode(t, decodeAnswer(t, st, body, nil), wire.ErrRoomTaken.Code)
}

func TestConcurrentAllocationsOfOneName(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	const n = 24
	var wg sync.WaitGroup
	errs := make([]*wire.Error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.allocate("contested", "eu", fmt.Sprintf("alloc-%d", i))
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case err.Code != wire.ErrRoomTaken.Code:
			t.Fatalf("a loser got %s, want room_name_taken", err.Code)
		}
	}
	if wins != 1 || r.roomCount() != 1 {
		t.Fatalf("%d winners and %d relay rooms, want exactly one", wins, r.roomCount())
	}
}

func TestLostRelayAnswerThenExactRetry(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RelayTimeout = 500 * time.Millisecond })
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "eu")
	a.register(h)
	b.register(h)
	// Make a the least loaded one, so it gets the room.
	wantStatuses(t, b.publish(h, pub("busy-b", "e1", 1, 5)), wire.PubApplied)
	a.set(func(f *fakeRelay) { f.allocMode = allocLoseOnce })

	_, err := h.allocate("room", "eu", "alloc-1")
	wantCode(t, err, wire.ErrIndeterminate.Code)
	if !err.Retryable || err.Status != http.StatusServiceUnavailable {
		t.Fatalf("indeterminate must be a retryable 503: %+v", err)
	}
	if a.roomCount() != 1 {
		t.Fatal("the relay did not commit the room before losing the answer")
	}
	// Now a is the busier relay: a fresh placement would pick b. The exact
	// retry must still go back to a, which replays.
	wantStatuses(t, a.publish(h, pub("busy-a", "e1", 1, 50)), wire.PubApplied)
	c, err := h.allocate("room", "eu", "alloc-1")
	noErr(t, err)
	if c.Secret != "host-secret-1" || c.Host != "eu.relay.test" {
		t.Fatalf("retry answered %+v", c)
	}
	if a.roomCount() != 1 || a.allocCalls.Load() != 2 || b.roomCount() != 0 || b.allocCalls.Load() != 0 {
		t.Fatalf("rooms a=%d b=%d, b asked %d times: the retry did not replay on a", a.roomCount(), b.roomCount(), b.allocCalls.Load())
	}
	if _, err := h.join("room"); err != nil {
		t.Fatalf("join after the retry: %v", err)
	}
	// Another allocation id meanwhile goes to the same relay, which refuses.
	_, err = h.allocate("room", "eu", "alloc-2")
	wantCode(t, err, wire.ErrRoomTaken.Code)
}

func TestPendingAllocationPinsOtherIDsToTheSameRelay(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RelayTimeout = 500 * time.Millisecond })
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "eu")
	a.register(h)
	b.register(h)
	wantStatuses(t, b.publish(h, pub("busy-b", "e1", 1, 5)), wire.PubApplied)
	a.set(func(f *fakeRelay) { f.allocMode = allocLoseOnce })
	_, err := h.allocate("room", "eu", "alloc-1")
	wantCode(t, err, wire.ErrIndeterminate.Code)
	// A different host asks for the name before the first one retries: it
	// reaches the relay that holds the room, which refuses it.
	_, err = h.allocate("room", "eu", "alloc-2")
	wantCode(t, err, wire.ErrRoomTaken.Code)
	if b.allocCalls.Load() != 0 {
		t.Fatal("a second relay was asked for a name pending on the first")
	}
}

func TestMalformedRelayAnswerIsSanitized(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	for _, mode := range []string{allocMalformed, allocGarbage} {
		r.set(func(f *fakeRelay) { f.allocMode = mode })
		st, body, _ := h.do(http.MethodPost, "/allocate_ws", map[string]string{"name": "room-" + mode, "region": "eu", "allocation_id": "a"}, nil)
		if st != http.StatusBadGateway || !contains(body, `"relay_bad_answer"`) {
			t.Fatalf("%s: %d %s", mode, st, body)
		}
		for _, leak := range []string{"leaky", "host-secret", r.info.Endpoint, "127.0.0.1"} {
			if contains(body, leak) {
				t.Fatalf("%s: the error leaks %q: %s", mode, leak, body)
			}
		}
		if _, err := h.join("room-" + mode); err == nil {
			t.Fatalf("%s: a malformed allocation became joinable", mode)
		}
	}
}

func TestReplayAnsweredWithANewEpochTakesIt(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	_, err := h.allocate("room", "eu", "alloc-1")
	noErr(t, err)
	r.set(func(f *fakeRelay) { f.allocMode = allocNewEpoch })
	c, err := h.allocate("room", "eu", "alloc-1")
	noErr(t, err)
	j, err := h.join("room")
	noErr(t, err)
	if c.Secret != "host-secret-2" || j.Secret != "client-secret-2" {
		t.Fatalf("after a new-epoch replay: capability %+v, join %+v", c, j)
	}
	r.set(func(f *fakeRelay) { f.allocMode = allocNormal })
	wantStatuses(t, r.publish(h, wire.Publication{Name: "room", Epoch: "epoch-1", Revision: 5, ClientSecret: "x"}), wire.PubFenced)
}

func TestPlacement(t *testing.T) {
	h := newHarness(t, nil)
	_, err := h.allocate("r0", "eu", "a")
	wantCode(t, err, wire.ErrNoRelays.Code)
	if err.Status != http.StatusServiceUnavailable || !err.Retryable {
		t.Fatalf("no relays: %+v", err)
	}

	eu1, eu2, us := newFakeRelay(t, "eu"), newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	eu1.register(h)
	eu2.register(h)
	us.register(h)
	// eu1: 3 connections in 1 room; eu2: 3 connections in 2 rooms; us: idle.
	wantStatuses(t, eu1.publish(h, pub("x1", "e", 1, 3)), wire.PubApplied)
	wantStatuses(t, eu2.publish(h, pub("y1", "e", 1, 1), pub("y2", "e", 1, 2)), wire.PubApplied, wire.PubApplied)

	placedOn := func(name, region string) string {
		t.Helper()
		_, err := h.allocate(name, region, "id-"+name)
		noErr(t, err)
		j, err := h.join(name)
		noErr(t, err)
		_ = j
		e := h.s.st.rooms.get(name)
		return e.live.Load().relay.info.Endpoint
	}
	if got := placedOn("r1", "us"); got != us.info.Endpoint {
		t.Fatal("the requested region was not preferred")
	}
	if got := placedOn("r2", "EU"); got != eu1.info.Endpoint {
		t.Fatal("equal connections: the relay with fewer rooms was not chosen")
	}
	// Now eu1 has 2 rooms (x1, r2) and 3 connections; give eu2 more connections.
	wantStatuses(t, eu2.publish(h, pub("y1", "e", 2, 9)), wire.PubApplied)
	if got := placedOn("r3", "eu"); got != eu1.info.Endpoint {
		t.Fatal("the least-connected relay was not chosen")
	}
	// Unknown or empty region: falls back to the least loaded relay anywhere.
	if got := placedOn("r4", "ap"); got != us.info.Endpoint {
		t.Fatal("unknown region did not fall back to the least loaded relay")
	}
	if got := placedOn("r5", ""); got != us.info.Endpoint && got != eu1.info.Endpoint {
		t.Fatal("empty region did not fall back")
	}

	// Draining relays take no new rooms.
	st, _, _ := h.do(http.MethodPost, "/v1/instances/"+us.boot()+"/drain", map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	if st != http.StatusOK {
		t.Fatalf("drain: %d", st)
	}
	if got := placedOn("r6", "us"); got == us.info.Endpoint {
		t.Fatal("a draining relay got a new room")
	}
	// A relay that says it is draining is skipped too.
	eu1.set(func(f *fakeRelay) { f.allocMode = allocDraining })
	if got := placedOn("r7", "eu"); got != eu2.info.Endpoint {
		t.Fatal("a relay that refused as draining was not skipped")
	}
	// A full relay is skipped too.
	eu1.set(func(f *fakeRelay) { f.allocMode = allocFull })
	if got := placedOn("r7a", "eu"); got != eu2.info.Endpoint {
		t.Fatal("a relay that refused as full was not skipped")
	}
	// A machine that no longer runs the chosen boot is skipped too.
	eu1.set(func(f *fakeRelay) { f.allocMode = allocStaleBoot })
	if got := placedOn("r7b", "eu"); got != eu2.info.Endpoint {
		t.Fatal("a relay that refused with stale_boot was not skipped")
	}
	// An unreachable relay is skipped (the request never left).
	eu1.srv.Close()
	if got := placedOn("r8", "eu"); got != eu2.info.Endpoint {
		t.Fatal("an unreachable relay was not skipped")
	}
	for _, r := range []*fakeRelay{eu1, eu2} {
		st, _, _ := h.do(http.MethodPost, "/v1/instances/"+r.boot()+"/drain", map[string]string{wire.HeaderInternalSecret: testSecret}, nil)
		if st != http.StatusOK {
			t.Fatalf("drain: %d", st)
		}
	}
	_, err = h.allocate("r9", "eu", "a")
	wantCode(t, err, wire.ErrNoRelays.Code)
}

func TestAllocateHeaderValidation(t *testing.T) {
	h := newHarness(t, nil)
	long := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'x'
		}
		return string(b)
	}
	for _, tc := range []struct {
		hdr  map[string]string
		code string
	}{
		{map[string]string{"region": "eu", "allocation_id": "a"}, wire.ErrMissingHeader.Code},
		{map[string]string{"name": "n", "region": "eu"}, wire.ErrMissingHeader.Code},
		{map[string]string{"name": long(wire.MaxSessionIDLen + 1), "region": "eu", "allocation_id": "a"}, wire.ErrBadHeader.Code},
		{map[string]string{"name": "n", "region": long(wire.MaxRegionLen + 1), "allocation_id": "a"}, wire.ErrBadHeader.Code},
		{map[string]string{"name": "n", "region": "eu", "allocation_id": long(wire.MaxAllocationIDLen + 1)}, wire.ErrBadHeader.Code},
	} {
		st, body, _ := h.do(http.MethodPost, "/allocate_ws", tc.hdr, nil)
		wantCode(t, decodeAnswer(t, st, body, nil), tc.code)
	}
	st, body, _ := h.do(http.MethodGet, "/join", nil, nil)
	wantCode(t, decodeAnswer(t, st, body, nil), wire.ErrMissingHeader.Code)
}

func TestRelayTimeoutIsIndeterminate(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RelayTimeout = 300 * time.Millisecond })
	r := newFakeRelay(t, "eu")
	r.register(h)
	r.set(func(f *fakeRelay) { f.allocMode = allocStallOnce })
	_, err := h.allocate("room", "eu", "alloc-1")
	wantCode(t, err, wire.ErrIndeterminate.Code)
	c, err := h.allocate("room", "eu", "alloc-1")
	noErr(t, err)
	if c.Secret != "host-secret-1" || r.roomCount() != 1 {
		t.Fatalf("retry after a timeout: %+v, %d rooms", c, r.roomCount())
	}
}

func TestPublicationDuringAllocationIsSerialized(t *testing.T) {
	h := newHarness(t, nil)
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	a.register(h)
	b.register(h)
	hold := make(chan struct{})
	a.set(func(f *fakeRelay) { f.hold = hold })

	allocDone := make(chan *wire.Error, 1)
	go func() {
		_, err := h.allocate("room", "eu", "alloc-1")
		allocDone <- err
	}()
	waitFor(t, "the allocation to reach the relay", func() bool { return a.allocCalls.Load() == 1 })
	// Another relay publishes the name while the allocation holds its lease.
	pubDone := make(chan []wire.PublicationStatus, 1)
	go func() { pubDone <- b.publish(h, pub("room", "b1", 1, 0)) }()
	close(hold)
	// Had the publication been decided first, it would have been applied and
	// the allocation refused; under the lease the allocation commits first.
	select {
	case err := <-allocDone:
		noErr(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("allocation did not finish")
	}
	select {
	case st := <-pubDone:
		wantStatuses(t, st, wire.PubConflict)
	case <-time.After(5 * time.Second):
		t.Fatal("publication did not finish")
	}
	if c, err := h.join("room"); err != nil || c.Host != "eu.relay.test" {
		t.Fatalf("join: %+v %v", c, err)
	}
}

// TestVacantRoomOfADrainingRelayIsPlacedAnew: a new allocation of a vacant
// room's name whose relay is draining is not refused as taken for the
// whole drain: the relay lets the vacant room go and answers draining, the
// old incarnation is fenced, and the new one is placed on another relay.
func TestVacantRoomOfADrainingRelayIsPlacedAnew(t *testing.T) {
	h := newHarness(t, nil)
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "eu")
	a.register(h)
	// Only a is registered: the room lands there.
	if _, err := h.allocate("scene", "eu", "play-1"); err != nil {
		t.Fatal(err)
	}
	b.register(h)
	var epoch string
	a.set(func(f *fakeRelay) { epoch = f.rooms["scene"].epoch })
	// Its host played and left: a publishes the room vacant.
	p := pub("scene", epoch, 5, 0)
	p.Vacant, p.AllocationID = true, "play-1"
	wantStatuses(t, a.publish(h, p), wire.PubApplied)

	a.set(func(f *fakeRelay) { f.allocMode = allocDraining })
	c, err := h.allocate("scene", "eu", "play-2")
	if err != nil {
		t.Fatalf("a vacant room's name whose relay drains: %v", err)
	}
	var onB bool
	b.set(func(f *fakeRelay) { onB = f.rooms["scene"] != nil && f.rooms["scene"].allocationID == "play-2" })
	if !onB {
		t.Fatal("the new incarnation was not placed on the other relay")
	}
	j, jerr := h.join("scene")
	if jerr != nil || j.Secret == "" || j.Secret == p.ClientSecret {
		t.Fatalf("join after the move: %+v %v (host capability %+v)", j, jerr, c)
	}
	// The draining relay's removal of the old incarnation changes nothing.
	wantStatuses(t, a.unregister(h, wire.Removal{Name: "scene", Epoch: epoch, Revision: 6}), wire.RemAlready)
	if j2, _ := h.join("scene"); j2.Secret != j.Secret {
		t.Fatal("the old incarnation's removal touched the new one")
	}

	// Not vacant: still taken, whatever the relay's state.
	if _, err := h.allocate("scene", "eu", "play-3"); err == nil || err.Code != wire.ErrRoomTaken.Code {
		t.Fatalf("a live room under another id: %v, want room_name_taken", err)
	}
}
