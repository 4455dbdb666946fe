package balancer

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// TestTombstonesUnderAGlobalBound: every release writes two tombstones
// (its incarnation's fence, its name's release mark) into one table of
// MaxTombstones. Within the bound every release stays fenced for the
// retention; past it the oldest go first, so an incarnation released at t
// is fenced until t + retention or until MaxTombstones newer tombstones
// exist, whichever comes first. Each early drop is counted, and the horizon
// that still holds is the age of the oldest tombstone kept.
func TestTombstonesUnderAGlobalBound(t *testing.T) {
	h := newHarness(t, func(o *Options) { guardQuiet(o); o.MaxTombstones = 8; o.TombstoneRetention = time.Hour })
	a := newFakeRelay(t, "eu")
	a.register(h)
	name := func(i int) string { return "room-" + strconv.Itoa(i) }
	release := func(i int) {
		t.Helper()
		h.clk.Advance(time.Second)
		wantStatuses(t, a.publish(h, pub(name(i), "e1", 1, 0)), wire.PubApplied)
		wantStatuses(t, a.unregister(h, wire.Removal{Name: name(i), Epoch: "e1", Revision: 1}), wire.RemApplied)
	}
	late := func(i int) wire.PublicationStatus {
		t.Helper()
		return a.publish(h, pub(name(i), "e1", 2, 0))[0]
	}
	for i := 1; i <= 4; i++ {
		release(i)
	}
	if s := h.s.st.tombs.stats(h.clk.Now()); s.entries != 8 || s.evicted != 0 || s.horizon != 3*time.Second {
		t.Fatalf("four releases in a table of 8: %+v, want 8 entries, none evicted, the oldest 3 s old", s)
	}
	for i := 1; i <= 4; i++ {
		if st := late(i); st != wire.PubFenced {
			t.Fatalf("within the bound, a late publication of released room %d: %s, want fenced", i, st)
		}
	}
	release(5) // pushes out room-1's fence and release mark
	for i := 2; i <= 5; i++ {
		if st := late(i); st != wire.PubFenced {
			t.Fatalf("past the bound, released room %d: %s, want still fenced", i, st)
		}
	}
	if st := late(1); st != wire.PubApplied {
		t.Fatalf("the oldest release past the bound: %s, want applied (its tombstone went first)", st)
	}
	if s := h.s.st.tombs.stats(h.clk.Now()); s.evicted < 2 || s.slots > 8 {
		t.Fatalf("after the bound was passed: %+v, want 2 or more evicted, at most 8 slots", s)
	}
	b := statsBounds(t, h, h.s.GeneratedAdminKey()).Tombstones
	if b.Held > 8 || b.Max != 8 || b.Evicted < 2 || b.HorizonSeconds >= b.RetentionSeconds || b.RetentionSeconds != 3600 {
		t.Fatalf("/v1/stats tombstones %+v, want at most 8 of 8 held, 2 or more evicted, a horizon under the retention", b)
	}
	if !contains(scrape(t, h), "purrfly_balancer_tombstones_evicted_total 2") {
		t.Fatal("/metrics does not count the early drops")
	}
}

// statsBounds is GET /v1/stats' bounds.
func statsBounds(t *testing.T, h *harness, key string) wire.Bounds {
	t.Helper()
	var stats wire.Stats
	st, body, _ := h.do(http.MethodGet, wire.PathStats, bearer(key), nil)
	if err := json.Unmarshal(body, &stats); st != http.StatusOK || err != nil || stats.Bounds == nil {
		t.Fatalf("/v1/stats: %d %s", st, body)
	}
	return *stats.Bounds
}

// TestTombstoneRewriteKeepsTheBound: a name released again and again (a
// PurrNet scene's room name reused on every Play) rewrites its release
// mark; the older writes leave the queue without taking anything with
// them, and the table never holds more than its bound.
func TestTombstoneRewriteKeepsTheBound(t *testing.T) {
	tb := newTombstones(6, time.Hour)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		at = at.Add(time.Second)
		tb.fence("room", "boot", "e"+strconv.Itoa(i), at)
		var errs []string
		tb.check(func(f string, args ...any) { errs = append(errs, f) })
		if len(errs) > 0 || tb.queue.n > 6 {
			t.Fatalf("after %d releases of one name: %v (%d slots)", i+1, errs, tb.queue.n)
		}
	}
	if !tb.released("room", at) || !tb.fenced("room", "boot", "e9", at) || !tb.fenced("room", "boot", "e7", at) {
		t.Fatal("the newest releases of the name are not held")
	}
	if tb.fenced("room", "boot", "e5", at) {
		t.Fatal("a release older than the bound is still held")
	}
	// Within the same instant (a fake clock) a rewrite adds no slot.
	n := tb.queue.n
	tb.fence("room", "boot", "e9", at)
	if tb.queue.n != n {
		t.Fatalf("a rewrite at the same time added a slot: %d -> %d", n, tb.queue.n)
	}
	// Past the retention everything goes, and the map is rebuilt small.
	tb.expire(at.Add(time.Hour))
	if tb.queue.n != 0 || len(tb.at) != 0 {
		t.Fatalf("after the retention: %d slots, %d entries", tb.queue.n, len(tb.at))
	}
}
