package flyaffinity

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// cachedResolver is a Resolver for machine 0 of n whose set is cached (one
// lookup against a real fake DNS, TTL of an hour), with the wall clock.
func cachedResolver(tb testing.TB, n int) *Resolver {
	tb.Helper()
	ids := machineIDs(n)
	f := startDNS(tb, txtValue(ids...))
	cfg := testConfig(f, ids[0])
	cfg.TTL = time.Hour
	r := newTestResolver(tb, cfg)
	if peers := peersOf(tb, r); len(peers) != n-1 {
		tb.Fatalf("got %d peers, want %d", len(peers), n-1)
	}
	return r
}

// benchSessions returns 1024 session ids shaped like PurrNet room names and
// an upgrade request for each.
func benchSessions() ([]wire.SessionID, []*http.Request) {
	sids := make([]wire.SessionID, 1024)
	reqs := make([]*http.Request, len(sids))
	for i := range sids {
		sids[i] = wire.SessionID(fmt.Sprintf("lobby-%08d", i))
		reqs[i] = upgradeRequest(sids[i])
	}
	return sids, reqs
}

// Route with a cached set does not allocate.
func TestRouteHotPathDoesNotAllocate(t *testing.T) {
	r := cachedResolver(t, 16)
	sids, reqs := benchSessions()
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		r.Route(sids[i%len(sids)], reqs[i%len(reqs)])
		i++
	})
	if allocs != 0 {
		t.Fatalf("Route allocates %.1f times per call with a cached set, want 0", allocs)
	}
}

func BenchmarkRoute(b *testing.B) {
	for _, n := range []int{3, 16, 64} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			r := cachedResolver(b, n)
			sids, reqs := benchSessions()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				r.Route(sids[i&1023], reqs[i&1023])
				i++
			}
		})
	}
}

func BenchmarkOwner(b *testing.B) {
	for _, n := range []int{3, 16, 64} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			r := cachedResolver(b, n)
			sids, _ := benchSessions()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, err := r.Owner(ctx, sids[i&1023]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkHRW is the bare ownership computation (key hash plus one mix per
// machine), without the Resolver around it.
func BenchmarkHRW(b *testing.B) {
	for _, n := range []int{3, 16, 64} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			set := newPeerSet(machineIDs(n), "", "app", 8080)
			sids, _ := benchSessions()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				set.owner(keyHash(string(sids[i&1023])))
				i++
			}
		})
	}
}
