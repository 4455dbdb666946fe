package flyaffinity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

func newFakeClock() *clock.Fake {
	return clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

// sessionsOwnedBy finds n sessions that machine id owns under set ids.
func sessionsOwnedBy(id string, ids []string, n int) []wire.SessionID {
	set := newPeerSet(ids, "", "purr-relay", 8080)
	var out []wire.SessionID
	for k := 0; len(out) < n; k++ {
		sid := wire.SessionID(fmt.Sprintf("room-%d", k))
		if set.owner(keyHash(string(sid))) == id {
			out = append(out, sid)
		}
	}
	return out
}

// The set is cached for TTL (no query before it expires) and a change in DNS
// is picked up once it does.
func TestTTLExpiryPicksUpChange(t *testing.T) {
	ids := machineIDs(3)
	f := startDNS(t, txtValue(ids[0], ids[1]))
	fake := newFakeClock()
	cfg := testConfig(f, ids[0])
	cfg.Clock = fake
	r := newTestResolver(t, cfg)

	// Sessions that the third machine will own, owned by ids[1] for now.
	var moving []wire.SessionID
	two := newPeerSet(ids[:2], "", "", 0)
	for _, sid := range sessionsOwnedBy(ids[2], ids, 60) {
		if two.owner(keyHash(string(sid))) == ids[1] {
			moving = append(moving, sid)
		}
	}
	if len(moving) < 10 {
		t.Fatalf("found only %d moving sessions", len(moving))
	}
	for _, sid := range moving {
		if got := r.Route(sid, upgradeRequest(sid)); got.Serve || got.Instance != ids[1] {
			t.Fatalf("before: Route(%q) = %+v, want hand-off to %s", sid, got, ids[1])
		}
	}
	f.set(txtValue(ids...))
	fake.Advance(cfg.TTL - time.Millisecond)
	for _, sid := range moving {
		if got := r.Route(sid, upgradeRequest(sid)); got.Instance != ids[1] {
			t.Fatalf("within TTL: Route(%q) = %+v, want the cached answer %s", sid, got, ids[1])
		}
	}
	if q := f.queries.Load(); q != 1 {
		t.Fatalf("DNS saw %d queries within one TTL, want 1", q)
	}
	fake.Advance(time.Millisecond)
	for _, sid := range moving {
		if got := r.Route(sid, upgradeRequest(sid)); got.Instance != ids[2] {
			t.Fatalf("after TTL: Route(%q) = %+v, want hand-off to the new machine %s", sid, got, ids[2])
		}
	}
	if q := f.queries.Load(); q != 2 {
		t.Fatalf("DNS saw %d queries, want 2", q)
	}
}

// A DNS outage (server gone, or answering SERVFAIL) keeps the last good set,
// counts the failure, and the set is refreshed once DNS is back.
func TestOutageKeepsLastGoodSet(t *testing.T) {
	for _, mode := range []string{"stopped", "servfail", "nxdomain", "empty"} {
		t.Run(mode, func(t *testing.T) {
			ids := machineIDs(4)
			f := startDNS(t, txtValue(ids[:3]...))
			fake := newFakeClock()
			reg := prometheus.NewRegistry()
			logs := &logRecorder{}
			cfg := testConfig(f, ids[0])
			cfg.Clock, cfg.Metrics, cfg.Logger = fake, reg, slog.New(logs)
			r := newTestResolver(t, cfg)

			sids := sessionsOwnedBy(ids[1], ids[:3], 10)
			check := func(when, want string) {
				t.Helper()
				for _, sid := range sids {
					if got := ownerOf(t, r, sid); got != want {
						t.Fatalf("%s: Owner(%q) = %s, want %s", when, sid, got, want)
					}
					start := time.Now() // wall clock: Route's bound on a real DNS socket
					got := r.Route(sid, upgradeRequest(sid))
					if got.Instance != want {
						t.Fatalf("%s: Route(%q) = %+v, want hand-off to %s", when, sid, got, want)
					}
					if d := time.Since(start); d > time.Second {
						t.Fatalf("%s: Route took %v", when, d)
					}
				}
			}
			check("before the outage", ids[1])

			switch mode {
			case "stopped":
				f.stop()
			case "servfail":
				f.setRcode(dns.RcodeServerFailure)
			case "nxdomain":
				f.setRcode(dns.RcodeNameError)
			case "empty":
				f.set("")
			}
			fake.Advance(cfg.TTL)
			check("during the outage", ids[1])
			if got := counter(t, reg, "purrfly_flyaffinity_lookups_total", "result", "error"); got != 1 {
				t.Fatalf("failed lookups = %v, want 1 (a failure is retried after the retry interval, not per call)", got)
			}
			if n := logs.count(slog.LevelWarn, "keeping the last good set"); n != 1 {
				t.Fatalf("%d warnings about keeping the last good set, want 1", n)
			}
			fake.Advance(time.Second)
			check("still down", ids[1])
			if got := counter(t, reg, "purrfly_flyaffinity_lookups_total", "result", "error"); got != 2 {
				t.Fatalf("failed lookups = %v, want 2", got)
			}

			// DNS comes back with ids[1] gone: its sessions move.
			if mode == "stopped" {
				f.restart()
			}
			f.set(txtValue(ids[0], ids[2], ids[3]))
			fake.Advance(time.Second)
			for _, sid := range sids {
				want := newPeerSet([]string{ids[0], ids[2], ids[3]}, "", "", 0).owner(keyHash(string(sid)))
				if got := ownerOf(t, r, sid); got != want {
					t.Fatalf("after the outage: Owner(%q) = %s, want %s", sid, got, want)
				}
			}
		})
	}
}

// With no set ever obtained, Route serves here and Owner and Peers say so.
func TestNoSetEverServesHere(t *testing.T) {
	f := startDNS(t, "")
	f.setRcode(dns.RcodeServerFailure)
	r := newTestResolver(t, testConfig(f, "aaa"))
	if got := r.Route("room-1", upgradeRequest("room-1")); !got.Serve {
		t.Fatalf("Route with no set = %+v, want serve", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.Owner(ctx, "room-1"); !errors.Is(err, ErrNoMachines) {
		t.Fatalf("Owner with no set: err = %v, want ErrNoMachines", err)
	}
	if _, err := r.Peers(ctx); !errors.Is(err, ErrNoMachines) {
		t.Fatalf("Peers with no set: err = %v, want ErrNoMachines", err)
	}
}

// Route waits for DNS at most RouteWait; the lookup goes on in the background
// and its answer serves later calls.
func TestRouteWaitIsBounded(t *testing.T) {
	ids := machineIDs(3)
	f := startDNS(t, txtValue(ids...))
	f.setDelay(1500 * time.Millisecond)
	cfg := testConfig(f, ids[0])
	cfg.RouteWait = 50 * time.Millisecond
	r := newTestResolver(t, cfg)

	sid := sessionsOwnedBy(ids[2], ids, 1)[0]
	start := time.Now() // wall clock: RouteWait bounds a real DNS socket's answer
	got := r.Route(sid, upgradeRequest(sid))
	took := time.Since(start)
	if !got.Serve {
		t.Fatalf("Route before any set = %+v, want serve", got)
	}
	if took > time.Second { // DNS answers after 1.5 s
		t.Fatalf("Route waited %v for DNS, want about RouteWait (50ms)", took)
	}
	testutil.Eventually(t, 5*time.Second, "the background lookup", func() bool {
		return r.Route(sid, upgradeRequest(sid)).Instance == ids[2]
	})
}

// Concurrent callers of an expired set share one lookup.
func TestConcurrentCallersShareOneLookup(t *testing.T) {
	ids := machineIDs(5)
	f := startDNS(t, txtValue(ids...))
	f.setDelay(100 * time.Millisecond)
	r := newTestResolver(t, testConfig(f, ids[0]))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := r.Owner(ctx, "room-1"); err != nil {
				t.Errorf("Owner: %v", err)
			}
		})
	}
	wg.Wait()
	if q := f.queries.Load(); q != 1 {
		t.Fatalf("20 concurrent callers made %d DNS queries, want 1", q)
	}
}

// Close cancels a lookup in flight promptly (goleak checks nothing is left)
// and Route keeps answering afterwards.
func TestCloseCancelsLookup(t *testing.T) {
	f := startDNS(t, "aaa sea,bbb ams")
	f.setDrop(true)
	cfg := testConfig(f, "aaa")
	cfg.LookupTimeout = 30 * time.Second
	cfg.RouteWait = 10 * time.Millisecond
	r := NewWithConfig(cfg)
	r.Route("room-1", nil) // starts a lookup that will never be answered
	start := time.Now()    // wall clock: Close cancels a lookup on a real socket
	r.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v with a lookup in flight", d)
	}
	if got := r.Route("room-1", nil); !got.Serve {
		t.Fatalf("Route after Close = %+v, want serve", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := r.Owner(ctx, "room-1"); !errors.Is(err, ErrNoMachines) {
		t.Fatalf("Owner after Close with no set: %v, want ErrNoMachines", err)
	}
	r.Close() // idempotent
}

// Route and Owner from many goroutines while the set changes and expires
// (run with -race).
func TestConcurrentRouteAndOwner(t *testing.T) {
	ids := machineIDs(6)
	f := startDNS(t, txtValue(ids[:3]...))
	fake := newFakeClock()
	cfg := testConfig(f, ids[0])
	cfg.Clock = fake
	r := newTestResolver(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 500 {
				sid := wire.SessionID(fmt.Sprintf("room-%d-%d", g, k))
				res := r.Route(sid, upgradeRequest(sid))
				if !res.Serve && !contains(ids, res.Instance) {
					t.Errorf("Route handed %q to unknown machine %q", sid, res.Instance)
					return
				}
				if k%10 == 0 {
					if _, err := r.Owner(ctx, sid); err != nil {
						t.Errorf("Owner: %v", err)
						return
					}
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for i := 0; i < 5000; i++ { // until the workers finish, bounded
		select {
		case <-done:
			return
		default:
		}
		f.set(txtValue(ids[:3+i%4]...))
		fake.Advance(cfg.TTL)
		time.Sleep(time.Millisecond) // wall clock: paces a bounded load loop (the set changes); not a synchronization
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("workers did not finish")
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// On the wall clock, expiry is a runtime timer flipping the entry's due
// flag: a change in DNS is picked up once TTL has passed, not before.
func TestWallClockTTLExpiry(t *testing.T) {
	ids := machineIDs(2)
	f := startDNS(t, txtValue(ids[0]))
	cfg := testConfig(f, ids[0])
	cfg.TTL = 200 * time.Millisecond
	r := newTestResolver(t, cfg)
	sid := sessionsOwnedBy(ids[1], ids, 1)[0]
	start := time.Now() // wall clock: this test is of the Real clock's expiry timer
	if got := r.Route(sid, upgradeRequest(sid)); !got.Serve {
		t.Fatalf("single machine: Route = %+v, want serve", got)
	}
	f.set(txtValue(ids...))
	if got := r.Route(sid, upgradeRequest(sid)); !got.Serve && time.Since(start) < cfg.TTL {
		t.Fatalf("Route picked up the change before TTL passed: %+v", got)
	}
	testutil.Eventually(t, 5*time.Second, "the change after TTL", func() bool {
		return r.Route(sid, upgradeRequest(sid)).Instance == ids[1]
	})
	if d := time.Since(start); d < cfg.TTL {
		t.Fatalf("change picked up after %v, before the TTL of %v", d, cfg.TTL)
	}
	if q := f.queries.Load(); q < 2 {
		t.Fatalf("DNS saw %d queries, want at least 2", q)
	}
}

// With a due set and a DNS server that stopped answering, Route waits at
// most RouteWait and routes with the stale set.
func TestRouteWithDueSetWaitsBounded(t *testing.T) {
	ids := machineIDs(3)
	f := startDNS(t, txtValue(ids...))
	cfg := testConfig(f, ids[0])
	cfg.TTL = 50 * time.Millisecond
	cfg.RouteWait = 50 * time.Millisecond
	r := newTestResolver(t, cfg)
	sid := sessionsOwnedBy(ids[1], ids, 1)[0]
	if got := r.Route(sid, upgradeRequest(sid)); got.Instance != ids[1] {
		t.Fatalf("Route = %+v, want hand-off to %s", got, ids[1])
	}
	f.setDrop(true)
	testutil.Eventually(t, 5*time.Second, "the set to fall due", func() bool { return r.cur.Load().due.Load() })
	start := time.Now() // wall clock: RouteWait bounds a real DNS socket's answer
	got := r.Route(sid, upgradeRequest(sid))
	if d := time.Since(start); d > time.Second { // the lookup gives up after LookupTimeout, 2 s
		t.Fatalf("Route with a due set waited %v on an unresponsive DNS, want about RouteWait (50ms)", d)
	}
	if got.Instance != ids[1] {
		t.Fatalf("Route with a due set = %+v, want the stale set's answer %s", got, ids[1])
	}
}
