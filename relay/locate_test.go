package relay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/wire"
)

// Lookups are triggered by unauthenticated requests, so a relay bounds
// how many it has in flight at the balancer: past the bound it answers as
// if the balancer were unreachable, without asking it.
func TestLocateBoundsLookupsInFlight(t *testing.T) {
	var asked atomic.Int32
	bal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		wire.WriteError(w, wire.ErrRoomNotFound)
	}))
	defer bal.Close()
	m, err := newMeshMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	l := &locator{
		mu:   lockrank.Mutex{Class: lockrank.Locator},
		base: bal.URL, secret: testSecret, client: bal.Client(), clock: clock.Real{},
		ttl: time.Second, timeout: 2 * time.Second, m: m,
		cache: map[string]locEntry{}, slots: make(chan struct{}, 1),
	}
	if _, found, err := l.locate(context.Background(), "a"); err != nil || found {
		t.Fatalf("locate with a free slot = found %v, %v; want not found from the balancer", found, err)
	}
	l.slots <- struct{}{} // every slot taken by lookups in flight
	if _, _, err := l.locate(context.Background(), "b"); !errors.Is(err, errLocateUnavailable) {
		t.Fatalf("locate with no free slot = %v, want errLocateUnavailable", err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the balancer was asked %d times, want once (the busy lookup must not reach it)", n)
	}
}

// TestLocateCacheIsBounded: the cache of room locations holds up to
// maxLocateCache entries; the next lookup drops the expired ones, and
// starts over when none has expired, rather than grow past the bound.
func TestLocateCacheIsBounded(t *testing.T) {
	bal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, wire.ErrRoomNotFound)
	}))
	defer bal.Close()
	m, err := newMeshMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	l := &locator{
		mu:   lockrank.Mutex{Class: lockrank.Locator},
		base: bal.URL, secret: testSecret, client: bal.Client(), clock: clk,
		ttl: time.Minute, timeout: 2 * time.Second, m: m,
		cache: map[string]locEntry{}, slots: make(chan struct{}, 1),
	}
	for i := range maxLocateCache - 1 {
		l.cache[fmt.Sprint("r", i)] = locEntry{until: clk.Now().Add(time.Hour)}
	}
	if _, _, err := l.locate(context.Background(), "last"); err != nil {
		t.Fatal(err)
	}
	if n := len(l.cache); n != maxLocateCache {
		t.Fatalf("%d entries cached, want all %d", n, maxLocateCache)
	}
	if _, _, err := l.locate(context.Background(), "past-the-bound"); err != nil {
		t.Fatal(err)
	}
	if n := len(l.cache); n != 1 {
		t.Fatalf("%d entries cached past the bound, want only the newest", n)
	}
}

// TestLocateRefusedIsNotRetried: a lookup the balancer refuses for its
// credential (a stale SECRET, or an address throttled for failed ones) is
// not asked again every half second, as one it did not answer is: that
// would only spend the address's failed-auth budget.
func TestLocateRefusedIsNotRetried(t *testing.T) {
	for _, refusal := range []*wire.Error{wire.ErrUnauthorized, wire.ErrThrottled} {
		var asked atomic.Int32
		bal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked.Add(1)
			wire.WriteError(w, refusal)
		}))
		m, err := newMeshMetrics(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		l := &locator{
			mu:   lockrank.Mutex{Class: lockrank.Locator},
			base: bal.URL, secret: testSecret, client: bal.Client(), clock: clock.Real{},
			ttl: time.Second, timeout: 2 * time.Second, m: m, cache: map[string]locEntry{},
		}
		_, found, err := (&mesh{loc: l}).locateRetrying(context.Background(), "room")
		bal.Close()
		if found || !errors.Is(err, errLocateRefused) || !errors.Is(err, errLocateUnavailable) {
			t.Errorf("%s: found %v, %v; want a refusal (unavailable)", refusal.Code, found, err)
		}
		if n := asked.Load(); n != 1 {
			t.Errorf("%s: the balancer was asked %d times, want once", refusal.Code, n)
		}
	}
}
