package balancer

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestStaleFailedProbeNeverCountsTowardRemoval: a health probe is tied to
// the relay's boot id and to a liveness version the balancer keeps, so a
// probe that failed before a newer heartbeat arrived cannot remove the relay
// that heartbeat refreshed, whatever HealthFailures is: the stale failure
// does not count at all, so after it the relay still takes HealthFailures
// fresh failures to remove. (With the default of 3 the heartbeat's reset of
// the count alone hides a missing version check; with 1 the stale failure
// would remove the relay outright, with more it would bring removal one
// probe early.)
func TestStaleFailedProbeNeverCountsTowardRemoval(t *testing.T) {
	for _, limit := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("HealthFailures=%d", limit), func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.HealthFailures = limit })
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
			case <-time.After(time.Minute):
				t.Fatal("the health probe never reached the relay")
			}
			// A heartbeat lands while the probe captured before it is in
			// flight; then that probe fails.
			r.set(func(f *fakeRelay) { f.pingHook = nil })
			if resp := r.register(h); resp.New {
				t.Fatal("a heartbeat of the registered boot answered New")
			}
			close(release)
			<-done
			if len(h.servers()) != 1 {
				t.Fatal("a failed probe captured before a newer heartbeat removed the relay")
			}

			// Fresh failures: limit-1 of them keep it, the limit-th removes it.
			failHealth(h, limit-1)
			if len(h.servers()) != 1 {
				t.Fatalf("removed after %d fresh failed probes of %d: the stale failure counted", limit-1, limit)
			}
			failHealth(h, 1)
			if len(h.servers()) != 0 {
				t.Fatalf("still registered after %d fresh failed probes", limit)
			}
		})
	}
}
