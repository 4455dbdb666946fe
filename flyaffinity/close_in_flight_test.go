package flyaffinity

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/testutil"
)

// Rule: a lookup cancelled by Close is not a DNS failure: it is not
// counted or logged as one and stores nothing, so Owner afterwards fails
// with ErrClosed.
func TestCloseDuringFirstLookupIsNoDNSFailure(t *testing.T) {
	f := startDNS(t, "aaa sea,bbb ams")
	f.setDrop(true)
	reg := prometheus.NewRegistry()
	logs := &logRecorder{}
	cfg := testConfig(f, "aaa")
	cfg.LookupTimeout = 30 * time.Second
	cfg.RouteWait = 10 * time.Millisecond
	cfg.Metrics, cfg.Logger = reg, slog.New(logs)
	r := newTestResolver(t, cfg)
	r.Route("room-1", nil) // starts a lookup that will never be answered
	testutil.Eventually(t, 5*time.Second, "the lookup to reach DNS", func() bool { return f.queries.Load() == 1 })
	r.Close()

	if got := counter(t, reg, "purrfly_flyaffinity_lookups_total", "result", "error"); got != 0 {
		t.Errorf("failed lookups after Close = %v, want 0", got)
	}
	if n := logs.count(slog.LevelWarn, "failed to look up"); n != 0 {
		t.Errorf("%d lookup-failure warnings after Close, want 0", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.Owner(ctx, "room-1"); !errors.Is(err, ErrClosed) {
		t.Errorf("Owner after Close = %v, want ErrClosed", err)
	}
}

// Rule: a caller waiting on a due lookup when Close cancels it gets the
// last good set ("Route and Owner keep answering from the last set").
func TestCloseDuringRefreshKeepsTheLastSet(t *testing.T) {
	ids := machineIDs(3)
	f := startDNS(t, txtValue(ids...))
	fake := newFakeClock()
	cfg := testConfig(f, ids[0])
	cfg.Clock = fake
	cfg.LookupTimeout = 30 * time.Second
	r := newTestResolver(t, cfg)
	sid := sessionsOwnedBy(ids[1], ids, 1)[0]
	if got := ownerOf(t, r, sid); got != ids[1] {
		t.Fatalf("Owner before = %s, want %s", got, ids[1])
	}

	f.setDrop(true)
	fake.Advance(cfg.TTL)
	type answer struct {
		owner string
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		o, err := r.Owner(ctx, sid)
		done <- answer{o, err}
	}()
	testutil.Eventually(t, 5*time.Second, "the refresh to reach DNS", func() bool { return f.queries.Load() == 2 })
	r.Close()
	if got := <-done; got.err != nil || got.owner != ids[1] {
		t.Fatalf("Owner waiting when Close cancelled the refresh = %q, %v; want %s from the last set", got.owner, got.err, ids[1])
	}
}

// Rule: a lookup that starts while Close is under way (the resolver is
// marked closed, its context not cancelled yet: a caller passed the closed
// check just before) makes no query and answers with the last good set.
func TestRefreshStartingDuringCloseKeepsTheLastSet(t *testing.T) {
	ids := machineIDs(3)
	f := startDNS(t, txtValue(ids...))
	fake := newFakeClock()
	cfg := testConfig(f, ids[0])
	cfg.Clock = fake
	r := newTestResolver(t, cfg)
	sid := sessionsOwnedBy(ids[1], ids, 1)[0]
	if got := ownerOf(t, r, sid); got != ids[1] {
		t.Fatalf("Owner before = %s, want %s", got, ids[1])
	}

	fake.Advance(cfg.TTL) // the set is due
	r.mu.Lock()
	r.closed = true // Close's first step; r.ctx is still live
	r.mu.Unlock()
	if got := ownerOf(t, r, sid); got != ids[1] {
		t.Fatalf("Owner during Close = %s, want %s from the last set", got, ids[1])
	}
	if q := f.queries.Load(); q != 1 {
		t.Fatalf("DNS saw %d queries, want 1 (no lookup once closed)", q)
	}
}
