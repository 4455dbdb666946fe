package balancer

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// failHealth runs n health rounds against relays that fail their probes.
func failHealth(h *harness, n int) {
	for range n {
		h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	}
}

// TestServersHideDrainingRelayWhenRegionServed: PurrTransport connects the
// host to the relay it pinged from /servers, whatever the allocation
// answered. So a draining relay is not listed while a non-draining one
// serves its region; a region with only draining relays still lists them.
func TestServersHideDrainingRelayWhenRegionServed(t *testing.T) {
	h := newHarness(t, nil)
	euOld, euNew, us := newFakeRelay(t, "eu"), newFakeRelay(t, "EU"), newFakeRelay(t, "us")
	for _, r := range []*fakeRelay{euOld, euNew, us} {
		r.register(h)
	}
	if n := len(h.servers()); n != 3 {
		t.Fatalf("/servers lists %d relays, want 3", n)
	}
	for _, r := range []*fakeRelay{euOld, us} {
		if _, ok := h.s.st.reg.setAdminDrain(r.boot(), true); !ok {
			t.Fatal("drain failed")
		}
	}
	got := map[string]bool{}
	for _, sv := range h.servers() {
		got[sv.Host] = true
	}
	if got[euOld.info.Host] || !got[euNew.info.Host] || !got[us.info.Host] {
		t.Fatalf("/servers lists %v; want the non-draining eu relay and the only (draining) us relay", got)
	}
}

// allocateLegacy is GET /allocate_ws (region and name only).
func (h *harness) allocateLegacy(name, region string) (wire.Capability, *wire.Error) {
	h.t.Helper()
	var c wire.Capability
	st, b, _ := h.do(http.MethodGet, "/allocate_ws", map[string]string{"name": name, "region": region}, nil)
	return c, decodeAnswer(h.t, st, b, &c)
}

// TestLegacyAllocateStaysInRegion: an old PurrTransport connects to the
// host of the region it pinged, ignoring the answer's host, so a legacy
// allocation is placed only on a relay of the requested region
// (case-insensitively) when the region has one; another region is used
// only when the region has no relay. POST allocations may still fall back.
func TestLegacyAllocateStaysInRegion(t *testing.T) {
	h := newHarness(t, nil)
	eu, us := newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	eu.register(h)
	us.register(h)
	eu.set(func(f *fakeRelay) { f.allocMode = allocDraining }) // refuses, though not yet marked draining

	if _, err := h.allocateLegacy("legacy", "EU"); err == nil {
		t.Fatal("a legacy allocation for eu was placed on another region's relay")
	}
	if n := us.roomCount(); n != 0 {
		t.Fatalf("the us relay holds %d rooms after a legacy eu allocation", n)
	}
	// The region with no relay at all falls back.
	c, err := h.allocateLegacy("elsewhere", "ap")
	noErr(t, err)
	if c.Host != us.info.Host && c.Host != eu.info.Host {
		t.Fatalf("fallback host %q", c.Host)
	}
	// A new client follows the answer's host: POST may leave the region.
	c, err = h.allocate("modern", "eu", "alloc-modern")
	noErr(t, err)
	if c.Host != us.info.Host {
		t.Fatalf("POST fallback host %q, want the us relay", c.Host)
	}
	// Once eu takes rooms again, the legacy one lands there.
	eu.set(func(f *fakeRelay) { f.allocMode = allocNormal })
	c, err = h.allocateLegacy("legacy", "eu")
	noErr(t, err)
	if c.Host != eu.info.Host {
		t.Fatalf("legacy host %q, want the eu relay", c.Host)
	}
}

// TestHealthNeedsConsecutiveFailures: one failed probe does not remove a
// relay (its rooms stay joinable); HealthFailures consecutive ones do. A
// successful probe, or a newer heartbeat, starts the count again.
func TestHealthNeedsConsecutiveFailures(t *testing.T) {
	h := newHarness(t, nil)
	if h.s.opts.HealthFailures != DefaultHealthFailures || DefaultHealthFailures != 3 {
		t.Fatalf("HealthFailures %d (default %d), want 3", h.s.opts.HealthFailures, DefaultHealthFailures)
	}
	r := newFakeRelay(t, "eu")
	r.register(h)
	wantStatuses(t, r.publish(h, pub("room", "e1", 1, 2)), wire.PubApplied)
	stays := func(what string) {
		t.Helper()
		if len(h.servers()) != 1 {
			t.Fatalf("%s: the relay was removed", what)
		}
		if _, err := h.join("room"); err != nil {
			t.Fatalf("%s: join: %v", what, err)
		}
	}
	r.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, 2)
	stays("two failed probes")
	r.set(func(f *fakeRelay) { f.pingFail = false })
	failHealth(h, 1) // a good probe resets the count
	r.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, 2)
	stays("a good probe, then two failed ones")
	r.register(h) // a newer heartbeat resets it too
	failHealth(h, 2)
	stays("a heartbeat, then two failed probes")
	failHealth(h, 1)
	if len(h.servers()) != 0 {
		t.Fatal("three consecutive failed probes did not remove the relay")
	}
	if _, err := h.join("room"); err == nil {
		t.Fatal("a removed relay's room is still joinable")
	}

	h1 := newHarness(t, func(o *Options) { o.HealthFailures = 1 })
	r1 := newFakeRelay(t, "eu")
	r1.register(h1)
	r1.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h1, 1)
	if len(h1.servers()) != 0 {
		t.Fatal("HealthFailures 1: a failed probe did not remove the relay")
	}
}

// TestRelayExpiryFollowsItsHeartbeat: a relay that heartbeats every 60 s
// (HEARTBEAT_SECONDS=60) is expired after 3 x 60 s without one, not after
// the default 90 s; one that reports nothing, or a short interval, after
// RelayExpiry.
func TestRelayExpiryFollowsItsHeartbeat(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RelayExpiry = 90 * time.Second })
	slow, plain, quick := newFakeRelay(t, "eu"), newFakeRelay(t, "us"), newFakeRelay(t, "ap")
	beat := func(r *fakeRelay, seconds int) {
		t.Helper()
		var resp wire.RegisterResponse
		noErr(t, r.post(h, wire.PathRegister, wire.RegisterRequest{Relay: r.info, HeartbeatSeconds: seconds}, &resp))
	}
	beat(slow, 60)
	beat(plain, 0)
	beat(quick, 5)
	registered := func() map[string]bool {
		out := map[string]bool{}
		for _, sv := range h.servers() {
			out[sv.Region] = true
		}
		return out
	}
	h.clk.Advance(91 * time.Second)
	h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	if got := registered(); !got["eu"] || got["us"] || got["ap"] {
		t.Fatalf("after 91 s registered %v, want only the 60 s-heartbeat relay", got)
	}
	h.clk.Advance(88 * time.Second) // 179 s
	h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	if !registered()["eu"] {
		t.Fatal("a 60 s-heartbeat relay expired before 180 s")
	}
	h.clk.Advance(2 * time.Second) // 181 s
	h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	if registered()["eu"] {
		t.Fatal("a 60 s-heartbeat relay did not expire after 180 s")
	}
	var resp wire.RegisterResponse
	if err := slow.post(h, wire.PathRegister, wire.RegisterRequest{Relay: slow.info, HeartbeatSeconds: -1}, &resp); err == nil {
		t.Fatal("a negative heartbeat interval was accepted")
	}
}
