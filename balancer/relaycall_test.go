package balancer

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestAllocationCallHeaders: the relay's allocation call carries the room,
// the region, the allocation id (also as Idempotency-Key, so the transport
// may resend it), the chosen boot, the shared secret and the internal
// protocol version.
func TestAllocationCallHeaders(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	_, err := h.allocate("lobby", "eu", "alloc-1")
	noErr(t, err)
	r.mu.Lock()
	got := r.lastHdr
	r.mu.Unlock()
	want := map[string]string{
		wire.HeaderName:            "lobby",
		wire.HeaderRegion:          "eu",
		wire.HeaderAllocationID:    "alloc-1",
		"Idempotency-Key":          "alloc-1",
		wire.HeaderTargetBoot:      r.boot(),
		wire.HeaderInternalSecret:  testSecret,
		wire.HeaderInternalVersion: strconv.Itoa(wire.InternalProtocolVersion),
	}
	for k, v := range want {
		if g := got.Values(k); len(g) != 1 || g[0] != v {
			t.Errorf("relay got %s = %q, want %q", k, g, v)
		}
	}
	if g := got.Get("Accept-Encoding"); g != "" {
		t.Errorf("relay got Accept-Encoding %q: the answer is small JSON, no gzip", g)
	}
}

// TestRelayCallsKeepTheirConnections: allocations in flight at once each
// hold a connection to the relay; a second burst as wide as the first
// (wider than the old idle pool of 32) reuses them all, instead of opening
// a new TCP connection per call beyond the pool.
func TestRelayCallsKeepTheirConnections(t *testing.T) {
	const width = 48
	// Held calls must outlast gathering all 48 at the relay, however
	// loaded the machine: no call may time out and be placed again.
	const patience = time.Minute
	h := newHarness(t, func(o *Options) { o.RelayTimeout, o.RelayInflight = patience, width })
	r := newFakeRelay(t, "eu")
	r.register(h)
	// The harness's own client keeps only two idle connections to the
	// balancer; this one keeps one per caller.
	tr := &http.Transport{MaxIdleConnsPerHost: width}
	defer tr.CloseIdleConnections()
	h.client = &http.Client{Transport: tr, Timeout: 2 * patience}

	burst := func(round int) {
		hold := make(chan struct{})
		r.set(func(f *fakeRelay) { f.hold = hold })
		start := r.allocCalls.Load()
		var wg sync.WaitGroup
		errs := make(chan *wire.Error, width)
		for i := range width {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := "room-" + strconv.Itoa(round) + "-" + strconv.Itoa(i)
				if _, err := h.allocate(name, "eu", "id-"+name); err != nil {
					errs <- err
				}
			}()
		}
		// Every call is at the relay at once: each holds its own connection.
		testutil.Eventually(t, patience, "every allocation to reach the relay", func() bool { return r.allocCalls.Load()-start == width })
		r.set(func(f *fakeRelay) { f.hold = nil })
		close(hold)
		wg.Wait()
		close(errs)
		for err := range errs {
			noErr(t, err)
		}
	}
	burst(0)
	opened := r.conns.Load()
	if opened < width {
		t.Fatalf("%d allocations in flight over %d connections", width, opened)
	}
	burst(1)
	if n := r.conns.Load() - opened; n != 0 {
		t.Fatalf("the second burst opened %d new connections to the relay, want 0 (all kept alive)", n)
	}
}
