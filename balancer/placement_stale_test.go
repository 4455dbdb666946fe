package balancer

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// on is the relay of p's endpoint among relays.
func on(endpoint string, relays ...*fakeRelay) *fakeRelay {
	for _, r := range relays {
		if r.info.Endpoint == endpoint {
			return r
		}
	}
	return nil
}

// TestPlacementSkipsStaleRelays, on the fake clock: a relay that missed
// two heartbeats of three, or failed a health probe since its last good
// one, gets no new room (its own rooms stay routed) until it answers
// again; every relay stale is no_relays saying so, and a room pinned to a
// stale relay is instance_draining naming why.
func TestPlacementSkipsStaleRelays(t *testing.T) {
	h, _ := adminHarness(t, nil, func(o *Options) { guardQuiet(o); o.RelayExpiry = 90 * time.Second })
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "eu")
	a.register(h)
	b.register(h)
	wantStatuses(t, b.publish(h, pub("busy-b", "e1", 1, 5)), wire.PubApplied) // placement prefers a
	if got := on(placedOn(t, h, "fresh", Placement{Region: "eu"}), a, b); got != a {
		t.Fatal("with both fresh the least loaded relay, a, was not chosen")
	}

	// a misses two heartbeats of three (60 s of a 90 s expiry); b beats.
	h.clk.Advance(60*time.Second + time.Millisecond)
	b.register(h)
	if got := on(placedOn(t, h, "a-silent", Placement{Region: "eu"}), a, b); got != b {
		t.Fatal("a relay silent for two thirds of its expiry was given a room")
	}
	in, err := h.admin(adminKeyA).Instance(t.Context(), a.boot())
	if err != nil || !in.Stale {
		t.Fatalf("a is not listed stale: %+v %v", in, err)
	}
	// Pinned to it: refused, saying why.
	_, werr := h.s.Allocate(t.Context(), "pinned-stale", "p1", Placement{Instance: a.boot()})
	if we := (*wire.Error)(nil); !errors.As(werr, &we) || we.Code != wire.ErrInstanceDraining.Code || !strings.Contains(we.Message, "stale") {
		t.Fatalf("pinned to a stale relay: %v", werr)
	}

	// A heartbeat makes it a candidate again.
	a.register(h)
	if got := on(placedOn(t, h, "a-back", Placement{Region: "eu"}), a, b); got != a {
		t.Fatal("a relay that heartbeat again was not placed")
	}

	// One failed health probe: stale until a good probe or a heartbeat.
	a.set(func(f *fakeRelay) { f.pingFail = true })
	h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	if got := on(placedOn(t, h, "a-probe-failed", Placement{Region: "eu"}), a, b); got != b {
		t.Fatal("a relay whose health probe failed was given a room")
	}
	a.set(func(f *fakeRelay) { f.pingFail = false })
	h.s.st.checkRelays(context.Background(), h.s.relayRemoved)
	if got := on(placedOn(t, h, "a-probe-ok", Placement{Region: "eu"}), a, b); got != a {
		t.Fatal("a relay whose next probe passed was not placed")
	}

	// Both stale: nothing is placed, and the answer says why.
	h.clk.Advance(61 * time.Second)
	_, err2 := h.allocate("nowhere", "eu", "id-nowhere")
	if err2 == nil || !strings.Contains(err2.Message, "2 stale") {
		t.Fatalf("every relay stale: %v, want the refusal to count 2 stale", err2)
	}
}

// TestForcePinsToADrainedRelay: a room pinned to a relay an operator
// drained is refused (409 instance_draining, naming force) unless the
// request says force; force needs an instance; a relay draining itself
// (shutting down) refuses even with force.
func TestForcePinsToADrainedRelay(t *testing.T) {
	h, eu, _, a := fleet2(t)
	if _, err := a.Drain(t.Context(), eu.boot()); err != nil {
		t.Fatal(err)
	}
	_, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "kept", AllocationID: "k1", Instance: eu.boot()})
	if !wantWire(err, wire.ErrInstanceDraining) || !strings.Contains(err.Error(), "force") {
		t.Fatalf("pinned to a drained relay without force: %v", err)
	}
	res, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "kept", AllocationID: "k2", Instance: eu.boot(), Force: true})
	if err != nil || res.Room.BootID != eu.boot() {
		t.Fatalf("forced onto the drained relay: %+v %v", res, err)
	}
	if _, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "loose", AllocationID: "l1", Force: true}); !wantWire(err, wire.ErrBadRequest) {
		t.Fatalf("force without an instance: %v, want bad_request", err)
	}
	// Unpinned allocations still pass the drained relay by.
	if _, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "anywhere", AllocationID: "x1", Region: "eu"}); err != nil {
		t.Fatal(err)
	}
	if rm, err := a.Room(t.Context(), "anywhere"); err != nil || rm.BootID == eu.boot() {
		t.Fatalf("an unpinned room went to the drained relay: %+v %v", rm, err)
	}
	// The relay draining itself (shutting down) takes no room, forced or not.
	var resp wire.RegisterResponse
	if werr := eu.post(h, wire.PathRegister, wire.RegisterRequest{Relay: eu.info, Draining: true}, &resp); werr != nil {
		t.Fatal(werr)
	}
	_, err = a.Reserve(t.Context(), wire.ReserveRequest{Name: "late", AllocationID: "z1", Instance: eu.boot(), Force: true})
	if !wantWire(err, wire.ErrInstanceDraining) || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("forced onto a relay that shuts down: %v", err)
	}
}

// TestRelayInflightCap: the balancer sends one relay at most
// RelayInflight allocation calls at once; past that, an allocation with
// nowhere else to go is 429 instance_busy (retryable), and the calls under
// way end as usual.
func TestRelayInflightCap(t *testing.T) {
	const limit, width = 4, 7
	h := newHarness(t, func(o *Options) { o.RelayInflight = limit; o.RelayTimeout = time.Minute })
	r := newFakeRelay(t, "eu")
	r.register(h)
	hold := make(chan struct{})
	r.set(func(f *fakeRelay) { f.hold = hold })
	release := sync.OnceFunc(func() { close(hold) })
	defer release() // a failure below does not leave the calls held
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := range width {
		wg.Go(func() {
			name := "room-" + strconv.Itoa(i)
			_, err := h.allocate(name, "eu", "id-"+name)
			code := "ok"
			if err != nil {
				code = err.Code
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	testutil.Eventually(t, 30*time.Second, "the busy answers", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return codes[wire.ErrInstanceBusy.Code] == width-limit
	})
	if n := r.allocCalls.Load(); n != limit {
		t.Fatalf("%d calls reached the relay at once, want %d", n, limit)
	}
	// A matchmaker's reservation is told the same, with when to retry.
	st, body, hd := h.do(http.MethodPost, wire.PathRooms, bearer(h.s.GeneratedAdminKey()), []byte(`{"name":"reserved","allocationId":"r1"}`))
	if wantErrBody(t, st, body, http.StatusTooManyRequests, wire.ErrInstanceBusy.Code); hd.Get("Retry-After") != "1" {
		t.Fatalf("a busy reservation's Retry-After is %q, want 1", hd.Get("Retry-After"))
	}
	release()
	wg.Wait()
	if codes["ok"] != limit || len(codes) != 2 {
		t.Fatalf("answers %v, want %d ok and %d instance_busy", codes, limit, width-limit)
	}
	if !wire.ErrInstanceBusy.Retryable {
		t.Fatal("instance_busy must be retryable")
	}
}
