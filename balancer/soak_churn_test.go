package balancer

import (
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// TestChurnSoak allocates and closes distinct rooms as fast as the
// balancer takes them (its top rate: two workers, each allocation through
// /allocate_ws and each close through DELETE /v1/rooms or the relay's
// outbox, alternately, with an event stream open and read) and checks that
// the live heap stays under a fixed bound: once the tombstone table is
// full it holds still, and it never passes the baseline plus a full table.
// Every released name was kept for the hour before (659 bytes each).
//
// By default it runs for 3 s with a table of 16,384 tombstones, so that
// the table fills within the run. PURRFLY_BALANCER_SOAK=10m runs it for
// that long with the balancer's defaults, and PURRFLY_BALANCER_SOAK_RATE
// paces it to that many pairs a second (RELIABILITY.md has the figures).
func TestChurnSoak(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's memory is not the heap the soak measures")
	}
	dur, maxTombs, report := 3*time.Second, 16384, time.Second
	if v := os.Getenv("PURRFLY_BALANCER_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("PURRFLY_BALANCER_SOAK=%q: %v", v, err)
		}
		dur, maxTombs, report = d, DefaultMaxTombstones, 10*time.Second
	}
	var tokens chan struct{} // nil: flat out
	if v := os.Getenv("PURRFLY_BALANCER_SOAK_RATE"); v != "" {
		rate, err := strconv.Atoi(v)
		if err != nil || rate < 100 {
			t.Fatalf("PURRFLY_BALANCER_SOAK_RATE=%q: want pairs a second, at least 100", v)
		}
		tokens = make(chan struct{}, rate/10)
		t.Cleanup(paceTokens(tokens, rate))
	}
	runtime.GC()
	base := liveHeapBytes()
	s, f := newMemSetupWith(t, func(o *Options) { o.MaxTombstones = maxTombs })
	h, key := s.Handler(), s.GeneratedAdminKey()
	sub, err := s.events.subscribe()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the event stream's diff loop and its reader
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				s.events.sync()
				for len(sub.ch) > 0 {
					sub.queued.Add(-int64(len(<-sub.ch)))
				}
			}
		}
	}()
	var pairs, fails atomic.Int64
	churn := func(w int) {
		defer wg.Done()
		for i := 0; ; i++ {
			if tokens != nil {
				select {
				case <-stop:
					return
				case <-tokens:
				}
			}
			select {
			case <-stop:
				return
			default:
			}
			name := "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
			rec := allocateWS(h, name)
			if rec.Code != http.StatusOK {
				fails.Add(1)
				continue
			}
			if i%2 == 0 {
				req := httptest.NewRequest(http.MethodDelete, "/v1/rooms/"+name, nil)
				req.Header.Set("Authorization", "Bearer "+key)
				rec = httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					fails.Add(1)
					continue
				}
			} else {
				f.mu.Lock()
				epoch := f.rooms[name].epoch
				delete(f.rooms, name)
				f.mu.Unlock()
				memInternal(t, s, wire.PathUnregister, wire.UnregisterRequest{BootID: f.info.BootID, Endpoint: f.info.Endpoint,
					Rooms: []wire.Removal{{Name: name, Epoch: epoch, Revision: 1}}}, nil)
			}
			f.mu.Lock()
			delete(f.targets, name) // the fake relay's own record of the call, not the balancer's
			f.mu.Unlock()
			pairs.Add(1)
		}
	}
	wg.Add(2)
	go churn(0)
	go churn(1)

	start := time.Now()
	var fullHeap, peak int64 // the live heap when the table first filled, the most seen after
	last := int64(0)
	for now := range time.Tick(report) {
		runtime.GC()
		heap := liveHeapBytes()
		ts := s.st.tombs.stats(s.clock.Now())
		n := pairs.Load()
		t.Logf("%6.0fs  %7.0f pairs/s  live heap %6.1f MiB  tombstones %d (evicted %d, horizon %.0fs)  rooms %d",
			now.Sub(start).Seconds(), float64(n-last)/report.Seconds(), float64(heap)/(1<<20), ts.entries, ts.evicted, ts.horizon.Seconds(),
			s.st.rooms.index.len())
		last = n
		if ts.evicted > 0 {
			if fullHeap == 0 {
				fullHeap = heap
			}
			peak = max(peak, heap)
		}
		if now.Sub(start) >= dur {
			break
		}
	}
	close(stop)
	wg.Wait()
	s.events.unsubscribe(sub)
	runtime.GC()
	end := liveHeapBytes()
	// A full table: two slots a release, each 16 bytes in the queue and a
	// map entry of at most 40 (an old map keeps its room until rebuilt).
	bound := base + int64(maxTombs)*56 + 8<<20
	t.Logf("%d pairs in %v (%.0f a second), %d failed; live heap %.1f MiB at the start, %.1f when the table filled, at most %.1f after, %.1f at the end (bound %.1f)",
		pairs.Load(), dur, float64(pairs.Load())/time.Since(start).Seconds(), fails.Load(), float64(base)/(1<<20),
		float64(fullHeap)/(1<<20), float64(peak)/(1<<20), float64(end)/(1<<20), float64(bound)/(1<<20))
	if fails.Load() > 0 {
		t.Fatalf("%d allocations or closes failed", fails.Load())
	}
	if fullHeap == 0 {
		t.Fatal("the tombstone table never filled: the run is too short to show its bound")
	}
	if peak > bound || end > bound {
		t.Fatalf("the live heap reached %.1f MiB (%.1f at the end), past the bound of %.1f", float64(peak)/(1<<20), float64(end)/(1<<20), float64(bound)/(1<<20))
	}
	// Holding still is judged on a run long enough to have many samples
	// after the table filled: the 3 s default has one or two, and an
	// event stream's queue (bounded, and counted in the bound above) can
	// swing a few MiB between two of them on a loaded machine.
	if dur >= 10*time.Second && peak > fullHeap+fullHeap/10+2<<20 {
		t.Fatalf("the live heap grew from %.1f MiB when the table filled to %.1f: it does not hold still", float64(fullHeap)/(1<<20), float64(peak)/(1<<20))
	}
}

// paceTokens puts rate tokens a second into tokens, a hundredth at a
// time, until the returned stop is called.
func paceTokens(tokens chan struct{}, rate int) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				for range rate / 100 {
					select {
					case tokens <- struct{}{}:
					default:
					}
				}
			}
		}
	}()
	return func() { close(done) }
}
