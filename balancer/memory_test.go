package balancer

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// TestMemoryBudgetRefusesNewRooms: while the live heap is past the budget's
// share, an allocation that would make a room is 503 balancer_full
// (retryable, counted, said in /v1/stats) and asks no relay, from
// /allocate_ws and the admin API alike; the exact retry of a live room is
// still answered; once the heap is back under, rooms are made again.
func TestMemoryBudgetRefusesNewRooms(t *testing.T) {
	var heap atomic.Int64
	h, _ := adminHarness(t, nil, func(o *Options) {
		o.MemoryBudget = 256 << 20
		o.readHeap = heap.Load
	})
	g := h.s.st.mem
	if g.budget != 256<<20 || g.from != "option" || g.refuseAt <= 0 || g.refuseAt >= g.budget {
		t.Fatalf("budget %d from %q, refused at %d", g.budget, g.from, g.refuseAt)
	}
	r := newFakeRelay(t, "eu")
	r.register(h)
	heap.Store(g.refuseAt - 1)
	if _, err := h.allocate("kept", "eu", "id-kept"); err != nil {
		t.Fatalf("under the budget: %v", err)
	}
	heap.Store(g.refuseAt)
	calls := r.allocCalls.Load()
	_, err := h.allocate("new", "eu", "id-new")
	wantCode(t, err, wire.ErrBalancerFull.Code)
	if err.Status != http.StatusServiceUnavailable || !err.Retryable {
		t.Fatalf("refusal %+v, want 503 and retryable", err)
	}
	st, body, _ := h.do(http.MethodPost, wire.PathRooms, bearer(adminKeyA), []byte(`{"name":"mm","allocationId":"mm"}`))
	wantErrBody(t, st, body, http.StatusServiceUnavailable, wire.ErrBalancerFull.Code)
	if _, err := h.allocate("kept", "eu", "id-kept"); err != nil {
		t.Fatalf("the exact retry of a live room while full: %v", err)
	}
	if got := r.allocCalls.Load() - calls; got != 1 {
		t.Fatalf("the relay was asked %d times while full, want once (the retry)", got)
	}
	var stats wire.Stats
	st, body, _ = h.do(http.MethodGet, wire.PathStats, bearer(adminKeyA), nil)
	if err := json.Unmarshal(body, &stats); st != http.StatusOK || err != nil || stats.Bounds == nil {
		t.Fatalf("/v1/stats: %d %s", st, body)
	}
	if m := stats.Bounds.Memory; !m.Refusing || m.Refused != 2 || m.Budget != 256<<20 || m.Heap != g.refuseAt {
		t.Fatalf("/v1/stats memory %+v, want refusing, 2 refused", m)
	}
	metrics := scrape(t, h)
	for _, want := range []string{`purrfly_balancer_allocations_total{result="balancer_full"} 2`, "purrfly_balancer_memory_refusing 1",
		"purrfly_balancer_memory_budget_bytes 2.68435456e+08"} {
		if !contains(metrics, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	heap.Store(g.refuseAt - 1)
	if _, err := h.allocate("new", "eu", "id-new"); err != nil {
		t.Fatalf("back under the budget: %v", err)
	}
}

// TestMemoryBudgetFound: the budget is Options.MemoryBudget, else
// GOMEMLIMIT (the live heap may then take 80% of it), else the cgroup's
// limit or the machine's memory (40%: without a memory limit Go's
// collector lets the heap reach twice the live heap).
func TestMemoryBudgetFound(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	debug.SetMemoryLimit(215 << 20)
	g := newMemGate(Options{})
	if g.budget != 215<<20 || g.from != "GOMEMLIMIT" || g.refuseAt != int64(float64(215<<20)*memShareLimited) {
		t.Fatalf("with GOMEMLIMIT=215MiB: %d from %q, refused at %d", g.budget, g.from, g.refuseAt)
	}
	if g := newMemGate(Options{MemoryBudget: 100 << 20}); g.from != "option" || g.refuseAt != int64(float64(100<<20)*memShareUnlimited) {
		t.Fatalf("a budget under GOMEMLIMIT: %d from %q, refused at %d (the collector holds the heap only at GOMEMLIMIT)", g.budget, g.from, g.refuseAt)
	}
	debug.SetMemoryLimit(old)
	if g := newMemGate(Options{}); old == 1<<63-1 && (g.budget <= 0 || g.from != "cgroup" && g.from != "meminfo") {
		t.Fatalf("without GOMEMLIMIT: %d from %q, want the cgroup's or the machine's memory", g.budget, g.from)
	}
	for in, want := range map[string]int64{"max\n": 0, "268435456\n": 268435456, "9223372036854771712\n": 0, "": 0} {
		if got := parseCgroupLimit(in); got != want {
			t.Errorf("parseCgroupLimit(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestMemoryBudgetHoldsWithStreamsOpen: with GOMEMLIMIT a few megabytes
// over the heap, three event streams open (two never read) and
// allocations coming until the balancer refuses, the live heap stays under
// the budget: the balancer refuses new rooms (balancer_full) before its
// rooms, tombstones and streams would take it past, and takes rooms again
// once some are released.
func TestMemoryBudgetHoldsWithStreamsOpen(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's memory is not the heap the budget measures")
	}
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	runtime.GC()
	base := liveHeapBytes()
	budget := int64(float64(base+12<<20) / memShareLimited)
	debug.SetMemoryLimit(budget)
	s, f := newMemSetupWith(t, nil)
	if s.st.mem.from != "GOMEMLIMIT" || s.st.mem.budget != budget {
		t.Fatalf("budget %d from %q, want GOMEMLIMIT's %d", s.st.mem.budget, s.st.mem.from, budget)
	}
	h := s.Handler()
	var subs []*subscriber
	for range 3 {
		sub, err := s.events.subscribe()
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	defer func() {
		for _, sub := range subs {
			s.events.unsubscribe(sub)
		}
	}()
	allocate := func(name string) int {
		req := httptest.NewRequest(http.MethodPost, "/allocate_ws", nil)
		req.Header.Set(wire.HeaderName, name)
		req.Header.Set(wire.HeaderRegion, "eu")
		req.Header.Set(wire.HeaderAllocationID, "id-"+name)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	made, refusedAt := 0, -1
	for i := 0; i < 400000 && refusedAt < 0; i++ {
		switch code := allocate(benchRoomName(i)); code {
		case http.StatusOK:
			made++
		case http.StatusServiceUnavailable:
			refusedAt = i
		default:
			t.Fatalf("allocation %d: %d", i, code)
		}
		if i%500 == 0 {
			s.events.sync()
			for len(subs[0].ch) > 0 {
				subs[0].queued.Add(-int64(len(<-subs[0].ch)))
			}
		}
	}
	if refusedAt < 0 {
		t.Fatalf("%d rooms made and none refused", made)
	}
	live := liveHeapBytes()
	runtime.GC()
	after := liveHeapBytes()
	t.Logf("heap %d MiB at the start, budget %d MiB, refused after %d rooms at a live heap of %d MiB (%d MiB after one more collection)",
		base>>20, budget>>20, made, live>>20, after>>20)
	if after > budget {
		t.Fatalf("the live heap reached %d MiB, past the %d MiB budget", after>>20, budget>>20)
	}
	// Release a quarter of the rooms at the relay: new rooms are taken again.
	req := wire.UnregisterRequest{BootID: f.info.BootID, Endpoint: f.info.Endpoint}
	f.mu.Lock()
	for i := 0; i < made; i += 4 {
		name := benchRoomName(i)
		req.Rooms = append(req.Rooms, wire.Removal{Name: name, Epoch: f.rooms[name].epoch, Revision: 1})
		delete(f.rooms, name)
	}
	f.mu.Unlock()
	memInternal(t, s, wire.PathUnregister, req, nil)
	runtime.GC()
	runtime.GC()
	s.st.mem.next.Store(0) // read the heap now, not up to memReadEvery later
	if code := allocate("after-release-" + strconv.Itoa(made)); code != http.StatusOK {
		t.Fatalf("after a quarter of the rooms closed: %d, want a room", code)
	}
}
