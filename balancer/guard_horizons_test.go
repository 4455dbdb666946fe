package balancer

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// guardQuiet keeps the health and cleanup loops from ticking while a test
// moves the fake clock: the test runs each round itself, at the instant it
// means.
func guardQuiet(o *Options) {
	o.HealthInterval = 1000 * time.Hour
	o.CleanupInterval = 1000 * time.Hour
}

// guardStatus is the /v1/instances status of the relay registered as boot
// ("" when it is not listed).
func guardStatus(h *harness, boot string) string {
	h.t.Helper()
	st, body, _ := h.do(http.MethodGet, wire.PathInstances, map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	var resp wire.InstancesResponse
	noErr(h.t, decodeAnswer(h.t, st, body, &resp))
	for _, in := range resp.Instances {
		if in.BootID == boot {
			return in.Status
		}
	}
	return ""
}

// TestRelayExpiryBoundary: a silent relay is removed only once more than
// max(RelayExpiry, 3 x its reported heartbeat interval) has passed since
// its last heartbeat; at exactly that age it is still registered.
func TestRelayExpiryBoundary(t *testing.T) {
	h := newHarness(t, func(o *Options) { guardQuiet(o); o.RelayExpiry = time.Minute })
	plain, slow := newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	plain.register(h)
	var resp wire.RegisterResponse
	noErr(t, slow.post(h, wire.PathRegister, wire.RegisterRequest{Relay: slow.info, HeartbeatSeconds: 40}, &resp)) // expiry 120 s
	check := func(at string, wantPlain, wantSlow bool) {
		t.Helper()
		h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
		if got := h.s.st.reg.current(plain.info.Endpoint) != nil; got != wantPlain {
			t.Fatalf("%s: relay with the 60 s expiry registered=%v, want %v", at, got, wantPlain)
		}
		if got := h.s.st.reg.current(slow.info.Endpoint) != nil; got != wantSlow {
			t.Fatalf("%s: relay with the 120 s expiry registered=%v, want %v", at, got, wantSlow)
		}
	}
	h.clk.Advance(time.Minute)
	check("60 s", true, true)
	h.clk.Advance(time.Nanosecond)
	check("60 s + 1 ns", false, true)
	h.clk.Advance(time.Minute - time.Nanosecond)
	check("120 s", false, true)
	h.clk.Advance(time.Nanosecond)
	check("120 s + 1 ns", false, false)
}

// TestPendingAllocationPinsForFiveMinutes: an allocation whose outcome the
// relay did not tell pins its room name to that relay for five minutes
// (pendingRetention), cleanup ticks included, so the exact retry reaches
// the relay that may hold the room; from five minutes on the name is
// placed afresh.
// The same allocation coming back later takes up its unfinished
// registration again; it never starts a second epoch beside it.
func TestPendingAllocationPinsForFiveMinutes(t *testing.T) {
	h := newHarness(t, guardQuiet)
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "eu")
	a.register(h)
	b.register(h)
	wantStatuses(t, b.publish(h, pub("busy-b", "e1", 1, 5)), wire.PubApplied) // placement prefers a
	for _, name := range []string{"r-cleanup", "r-before", "r-at"} {
		a.set(func(f *fakeRelay) { f.allocMode = allocLoseOnce })
		_, err := h.allocate(name, "eu", "id-"+name)
		wantCode(t, err, wire.ErrIndeterminate.Code)
	}
	wantStatuses(t, a.publish(h, pub("busy-a", "e1", 1, 10)), wire.PubApplied) // now placement prefers b
	retry := func(name string, wantOnA bool) {
		t.Helper()
		before := b.allocCalls.Load()
		_, err := h.allocate(name, "eu", "id-"+name)
		noErr(t, err)
		if onB := b.allocCalls.Load() != before; onB == wantOnA {
			t.Fatalf("retry of %s went to the other relay (on b: %v)", name, onB)
		}
	}

	// The relays heartbeat on meanwhile: a relay silent for minutes is
	// stale and takes no new room, which is not what this test is about.
	beat := func() { a.register(h); b.register(h) }
	h.clk.Advance(time.Minute)
	beat()
	h.s.st.cleanup()
	retry("r-cleanup", true)
	h.clk.Advance(4*time.Minute - time.Nanosecond)
	beat()
	retry("r-before", true)
	h.clk.Advance(time.Nanosecond)
	retry("r-at", false)
}

// TestTombstoneFencesUntilExactlyTheRetention: a released incarnation is
// fenced for TombstoneRetention and no longer, even before the cleanup
// tick deletes its tombstone.
// A late registration of the removed epoch stays fenced while the horizon
// lasts; once the tombstone is gone, so is that promise.
func TestTombstoneFencesUntilExactlyTheRetention(t *testing.T) {
	h := newHarness(t, func(o *Options) { guardQuiet(o); o.TombstoneRetention = time.Hour })
	a := newFakeRelay(t, "eu")
	a.register(h)
	wantStatuses(t, a.publish(h, pub("room", "e1", 1, 0)), wire.PubApplied)
	wantStatuses(t, a.unregister(h, wire.Removal{Name: "room", Epoch: "e1", Revision: 1}), wire.RemApplied)
	h.clk.Advance(time.Hour - time.Nanosecond)
	wantStatuses(t, a.publish(h, pub("room", "e1", 2, 0)), wire.PubFenced)
	h.clk.Advance(time.Nanosecond)
	wantStatuses(t, a.publish(h, pub("room", "e1", 2, 0)), wire.PubApplied)
}

// TestGoneEndpointForgottenAtTheRetention: an admin drain mark outlives its
// relay's removal until the endpoint has been gone (since its last
// heartbeat) for TombstoneRetention: a return just before that is still
// draining; at exactly that age the cleanup forgets it, and the boot comes
// back live.
func TestGoneEndpointForgottenAtTheRetention(t *testing.T) {
	const retention = time.Hour
	h := newHarness(t, func(o *Options) { guardQuiet(o); o.TombstoneRetention = retention; o.RelayExpiry = 1000 * time.Hour })
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "eu")
	for _, r := range []*fakeRelay{a, b} {
		r.register(h)
		if st, body, _ := h.do(http.MethodPost, "/v1/instances/"+r.boot()+"/drain", map[string]string{"Authorization": "Bearer " + testSecret}, nil); st != http.StatusOK {
			t.Fatalf("drain: %d %s", st, body)
		}
		r.set(func(f *fakeRelay) { f.pingFail = true })
	}
	failHealth(h, DefaultHealthFailures)
	if h.s.st.reg.current(a.info.Endpoint) != nil || h.s.st.reg.current(b.info.Endpoint) != nil {
		t.Fatal("the failed relays were not removed")
	}
	back := func(r *fakeRelay) string {
		t.Helper()
		r.set(func(f *fakeRelay) { f.pingFail = false })
		r.register(h)
		return guardStatus(h, r.boot())
	}
	h.clk.Advance(retention - time.Nanosecond)
	h.s.st.cleanup()
	if st := back(a); st != wire.InstanceDraining {
		t.Fatalf("back just before the retention: %q, want draining", st)
	}
	h.clk.Advance(time.Nanosecond)
	h.s.st.cleanup()
	if st := back(b); st != wire.InstanceLive {
		t.Fatalf("back at the retention: %q, want live", st)
	}
}
