package balancer

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

func TestRegisterNeedsPingProof(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.set(func(f *fakeRelay) { f.pingBoot = "someone-else" })
	_, err := r.registerAs(h, r.info)
	wantCode(t, err, wire.ErrBootNotProven.Code)
	if !err.Retryable || err.Status != http.StatusConflict {
		t.Fatalf("boot_not_proven must be a retryable 409, got %+v", err)
	}
	if len(h.servers()) != 0 {
		t.Fatal("an unproven relay is listed")
	}

	r.set(func(f *fakeRelay) { f.pingBoot = "" })
	first := r.register(h)
	if !first.New || !first.Republish || first.BalancerBoot != h.s.BootID() {
		t.Fatalf("first heartbeat: got %+v, want New, Republish and the balancer boot %s", first, h.s.BootID())
	}
	second := r.register(h)
	if second.New || second.Republish || second.LivenessVersion <= first.LivenessVersion {
		t.Fatalf("second heartbeat: got %+v after %+v, want a plain refresh with a newer liveness version", second, first)
	}
}

func TestBootReplacementInvalidatesOldRoutes(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	oldBoot := r.boot()
	wantStatuses(t, r.publish(h, pub("room", "e1", 1, 3)), wire.PubApplied)
	if _, err := h.join("room"); err != nil {
		t.Fatalf("join before restart: %v", err)
	}

	newInfo := r.restart()
	resp, err := r.registerAs(h, newInfo)
	noErr(t, err)
	if !resp.New || !resp.Republish {
		t.Fatalf("replacement answer %+v, want New and Republish", resp)
	}
	// The old boot's routes vanished at once.
	if _, err := h.join("room"); err == nil || err.Code != wire.ErrRoomNotFound.Code {
		t.Fatalf("join after replacement: got %v, want room_not_found", err)
	}
	if l := h.list(0); l.Total != 0 {
		t.Fatalf("list after replacement holds %d rooms", l.Total)
	}

	// A delayed heartbeat and publication of the prior boot are refused.
	oldInfo := newInfo
	oldInfo.BootID = oldBoot
	_, err = r.registerAs(h, oldInfo)
	wantCode(t, err, wire.ErrStaleBoot.Code)
	wantStatuses(t, r.publishAs(h, oldBoot, pub("room", "e1", 2, 3)), wire.PubRejected)
	wantStatuses(t, r.unregisterAs(h, oldBoot, wire.Removal{Name: "other", Epoch: "x", Revision: 1}), wire.RemSuperseded)

	// The new boot republishes the name.
	wantStatuses(t, r.publish(h, pub("room", "e1", 1, 0)), wire.PubApplied)
	c, jerr := h.join("room")
	noErr(t, jerr)
	if c.Secret != "cs-room-e1" || c.Host != "eu.relay.test" {
		t.Fatalf("join after republish: %+v", c)
	}
	// The prior boot is still refused (remembered, no ping needed).
	_, err = r.registerAs(h, oldInfo)
	wantCode(t, err, wire.ErrStaleBoot.Code)
}

func TestDelayedHeartbeatOfUnknownPriorBootIsStale(t *testing.T) {
	// The balancer never saw the prior boot (it restarted): the endpoint's
	// ping names the registered boot, so the delayed one is stale.
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	stale := r.info
	stale.BootID = "a-prior-process"
	_, err := r.registerAs(h, stale)
	wantCode(t, err, wire.ErrStaleBoot.Code)
	if got := h.servers(); len(got) != 1 {
		t.Fatalf("servers after a stale heartbeat: %+v", got)
	}
}

func TestMetadataIsImmutableWithinABoot(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	for _, change := range []func(*wire.RelayInfo){
		func(i *wire.RelayInfo) { i.Port = 443 },
		func(i *wire.RelayInfo) { i.Region = "us" },
		func(i *wire.RelayInfo) { i.Host = "elsewhere.test" },
		func(i *wire.RelayInfo) { i.UDPPortV2 = 9999 },
		func(i *wire.RelayInfo) { i.SSL = true },
		func(i *wire.RelayInfo) { i.Endpoint = "http://127.0.0.1:1" },
		func(i *wire.RelayInfo) { i.PublicEndpoint = "https://relay-app.example" },
	} {
		info := r.info
		change(&info)
		_, err := r.registerAs(h, info)
		wantCode(t, err, wire.ErrMetadataChanged.Code)
	}
	// Process facts are not routing metadata.
	info := r.info
	info.Version = "v2"
	_, err := r.registerAs(h, info)
	noErr(t, err)
}

// TestMetadataIsImmutableAfterRemoval: a boot the balancer removed (its
// health probes failed) that registers again keeps its routing metadata:
// with other metadata, at its endpoint or another, it is refused as within
// a boot; with the same, it proves itself and is back.
func TestMetadataIsImmutableAfterRemoval(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.HealthFailures = 1 })
	r := newFakeRelay(t, "eu")
	r.register(h)
	r.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, 1)
	if len(h.servers()) != 0 {
		t.Fatal("the relay was not removed")
	}
	r.set(func(f *fakeRelay) { f.pingFail = false })
	for _, change := range []func(*wire.RelayInfo){
		func(i *wire.RelayInfo) { i.Region = "us" },
		func(i *wire.RelayInfo) { i.UDPPortV2 = 9999 },
		func(i *wire.RelayInfo) { i.PublicEndpoint = "https://relay-app.example" },
		func(i *wire.RelayInfo) { i.Endpoint = "http://127.0.0.1:1" },
	} {
		info := r.info
		change(&info)
		_, err := r.registerAs(h, info)
		wantCode(t, err, wire.ErrMetadataChanged.Code)
	}
	if len(h.servers()) != 0 {
		t.Fatal("a removed boot came back with other routing metadata")
	}
	r.register(h)
	if len(h.servers()) != 1 {
		t.Fatal("a removed boot with its own metadata did not come back")
	}
}

func TestRegisterValidation(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	for _, change := range []func(*wire.RelayInfo){
		func(i *wire.RelayInfo) { i.BootID = "" },
		func(i *wire.RelayInfo) { i.Endpoint = "ftp://x" },
		func(i *wire.RelayInfo) { i.Host = "" },
		func(i *wire.RelayInfo) { i.Port = 0 },
		func(i *wire.RelayInfo) { i.UDPPortV2 = 70000 },
	} {
		info := r.info
		change(&info)
		_, err := r.registerAs(h, info)
		wantCode(t, err, wire.ErrBadRequest.Code)
	}
}

func TestHealthProbeCapturedBeforeHeartbeatDoesNotRemove(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)

	entered, release := make(chan struct{}), make(chan struct{})
	r.set(func(f *fakeRelay) {
		f.pingHook = func() { close(entered); <-release }
		f.pingFail = true
	})
	done := make(chan struct{})
	go func() { defer close(done); h.s.st.checkRelays(context.Background(), h.s.relayRemoved) }()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the health probe never reached the relay")
	}
	// A heartbeat lands while the probe (captured before it) is in flight.
	r.set(func(f *fakeRelay) { f.pingHook = nil })
	if resp := r.register(h); resp.New {
		t.Fatal("a heartbeat of the registered boot answered New")
	}
	close(release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("health round did not finish")
	}
	if len(h.servers()) != 1 {
		t.Fatal("a failed probe captured before a newer heartbeat removed the relay")
	}

	// Without a newer heartbeat, HealthFailures consecutive failed probes
	// remove it, and its routes.
	wantStatuses(t, r.publish(h, pub("room", "e1", 1, 2)), wire.PubApplied)
	failHealth(h, DefaultHealthFailures)
	if len(h.servers()) != 0 {
		t.Fatal("a failed probe did not remove the relay")
	}
	if _, err := h.join("room"); err == nil {
		t.Fatal("a removed relay's room is still joinable")
	}
	wantStatuses(t, r.publish(h, pub("room", "e1", 2, 2)), wire.PubRejected)

	// Its next heartbeat re-registers it and asks for republication, which
	// adopts the room again.
	r.set(func(f *fakeRelay) { f.pingFail = false })
	resp := r.register(h)
	if !resp.New || !resp.Republish {
		t.Fatalf("heartbeat after removal: %+v, want New and Republish", resp)
	}
	wantStatuses(t, r.publish(h, pub("room", "e1", 2, 2)), wire.PubApplied)
	if _, err := h.join("room"); err != nil {
		t.Fatalf("join after republish: %v", err)
	}
}

func TestHealthProbeOfAnotherBootRemoves(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	r.set(func(f *fakeRelay) { f.pingBoot = "replaced-process" })
	h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	if len(h.servers()) != 0 {
		t.Fatal("a relay whose endpoint reports another boot stayed registered")
	}
}

func TestRelayExpiresWithoutHeartbeat(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RelayExpiry = time.Minute })
	r := newFakeRelay(t, "eu")
	r.register(h)
	h.clk.Advance(30 * time.Second)
	h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	if len(h.servers()) != 1 {
		t.Fatal("a relay within its expiry was removed")
	}
	h.clk.Advance(31 * time.Second)
	h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	if len(h.servers()) != 0 {
		t.Fatal("a relay past its expiry stayed registered")
	}
}

func TestHealthLoopRunsOnTheClock(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.HealthInterval = 10 * time.Second })
	r := newFakeRelay(t, "eu")
	r.register(h)
	var pings atomic.Int32
	r.set(func(f *fakeRelay) { f.pingFail, f.pingHook = true, func() { pings.Add(1) } })
	waitFor(t, "the loops to wait on the clock", func() bool { return h.clk.Waiters() >= 2 })
	// HealthFailures rounds of failed probes, one per tick. The next tick
	// comes once this round's probe has started, so none is dropped.
	for i := int32(1); i <= DefaultHealthFailures; i++ {
		h.clk.Advance(10 * time.Second)
		waitFor(t, "a health probe", func() bool { return pings.Load() >= i })
	}
	waitFor(t, "the health loop to remove the relay", func() bool { return len(h.servers()) == 0 })
}

func TestBalancerRestartAsksForRepublication(t *testing.T) {
	h1 := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	first := r.register(h1)
	wantStatuses(t, r.publish(h1, pub("room", "e1", 1, 2)), wire.PubApplied)

	h2 := newHarness(t, nil) // the balancer's next process
	resp := r.register(h2)
	if resp.BalancerBoot == first.BalancerBoot || !resp.New || !resp.Republish {
		t.Fatalf("first heartbeat to a new balancer process: %+v (previous boot %s)", resp, first.BalancerBoot)
	}
	if _, err := h2.join("room"); err == nil {
		t.Fatal("a room is joinable before its relay republished it")
	}
	wantStatuses(t, r.publish(h2, pub("room", "e1", 1, 2)), wire.PubApplied)
	if _, err := h2.join("room"); err != nil {
		t.Fatalf("join after republication: %v", err)
	}
}

// TestRegistryForgetsEndpointsThatWentAway: what the balancer remembers
// per endpoint (retired boots, an admin drain mark, the proof gate) does
// not outlive the endpoint: the gate goes when nobody uses it, the rest
// once the endpoint has been gone for the retention, and not before (a
// relay removed by a failed probe that comes back keeps its drain mark).
func TestRegistryForgetsEndpointsThatWentAway(t *testing.T) {
	const retention = time.Hour
	h := newHarness(t, func(o *Options) {
		o.TombstoneRetention = retention
		o.HealthInterval = 1000 * time.Hour
		o.CleanupInterval = 1000 * time.Hour
		o.RelayExpiry = 1000 * time.Hour
	})
	a := newFakeRelay(t, "eu")
	a.register(h)
	if _, err := a.registerAs(h, a.restart()); err != nil { // the first boot is retired
		t.Fatal(err)
	}
	if st, _, _ := h.do(http.MethodPost, "/v1/instances/"+a.boot()+"/drain", map[string]string{"Authorization": "Bearer " + testSecret}, nil); st != http.StatusOK {
		t.Fatalf("drain: %d", st)
	}
	sizes := func() (retired, drained, gates, gone int) {
		g := h.s.st.reg
		g.mu.RLock()
		defer g.mu.RUnlock()
		return len(g.retired), len(g.drained), len(g.gates), len(g.gone)
	}
	if r, d, g, _ := sizes(); r != 1 || d != 1 || g != 0 {
		t.Fatalf("retired %d, drained %d, gates %d; want 1, 1 and no gate left after the proofs", r, d, g)
	}

	// Removed by failed probes, then back within the retention: still drained.
	a.set(func(f *fakeRelay) { f.pingFail = true })
	for range h.s.opts.HealthFailures {
		h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	}
	if h.s.st.reg.current(a.info.Endpoint) != nil {
		t.Fatal("the relay was not removed")
	}
	h.clk.Advance(retention / 2)
	h.s.st.cleanup()
	if r, d, _, gone := sizes(); r != 1 || d != 1 || gone != 1 {
		t.Fatalf("within the retention: retired %d, drained %d, gone %d; want all kept", r, d, gone)
	}
	a.set(func(f *fakeRelay) { f.pingFail = false })
	a.register(h)
	st, body, _ := h.do(http.MethodGet, "/v1/instances", map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	var insts wire.InstancesResponse
	noErr(t, decodeAnswer(t, st, body, &insts))
	if len(insts.Instances) != 1 || insts.Instances[0].Status != wire.InstanceDraining {
		t.Fatalf("the relay came back as %+v, want draining still", insts)
	}

	// Gone for good: forgotten after the retention.
	a.set(func(f *fakeRelay) { f.pingFail = true })
	for range h.s.opts.HealthFailures {
		h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	}
	h.clk.Advance(retention - time.Minute)
	h.s.st.cleanup()
	if r, _, _, _ := sizes(); r != 1 {
		t.Fatal("forgotten before the retention")
	}
	h.clk.Advance(2 * time.Minute)
	h.s.st.cleanup()
	if r, d, g, gone := sizes(); r+d+g+gone != 0 {
		t.Fatalf("after the retention: retired %d, drained %d, gates %d, gone %d; want nothing", r, d, g, gone)
	}
}

// TestRegistryBound: past MaxRelays a new endpoint is refused with a
// retryable 503 too_many_relays (before its proof: no probe is spent on
// it), while the registered relays keep heartbeating; once one has
// gone (its probe failed), the newcomer gets in.
func TestRegistryBound(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxRelays = 2; o.HealthFailures = 1 })
	a, b, c := newFakeRelay(t, "eu"), newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	a.register(h)
	b.register(h)
	var probes atomic.Int32
	c.set(func(f *fakeRelay) { f.pingHook = func() { probes.Add(1) } })
	_, err := c.registerAs(h, c.info)
	wantCode(t, err, wire.ErrTooManyRelays.Code)
	if !err.Retryable || err.Status != http.StatusServiceUnavailable {
		t.Fatalf("too_many_relays must be a retryable 503, got %+v", err)
	}
	if got := probes.Load(); got != 0 {
		t.Fatalf("the refused relay was probed %d times", got)
	}
	if hb := a.register(h); hb.New {
		t.Fatalf("a registered relay's heartbeat past the bound: %+v, want a refresh", hb)
	}
	c.set(func(f *fakeRelay) { f.pingHook = nil })
	b.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, 1)
	if first := c.register(h); !first.New {
		t.Fatalf("after one left: %+v, want a new registration", first)
	}
	if n := len(h.servers()); n != 2 {
		t.Fatalf("%d relays listed, want 2", n)
	}
}
