package rollout

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowLeaseAPI is a Machines API that knows one machine's lease and
// handles a refresh slowly, the way a busy API may: refreshHold after it
// arrives, or as soon as a release arrives (the release is handled first).
// As flysim does, a refresh of a lease that is gone takes a new one.
type slowLeaseAPI struct {
	refreshHold time.Duration

	mu        sync.Mutex
	nonce     string // "" when no lease is held
	seq       int
	inFlight  int           // refreshes being handled
	raced     bool          // a release arrived while a refresh was in flight
	refreshes chan struct{} // cap 1: a refresh arrived
	deleted   chan struct{} // closed by the first release
	delOnce   sync.Once
	wg        sync.WaitGroup // handlers running
}

func (a *slowLeaseAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.wg.Add(1)
	defer a.wg.Done()
	if !strings.HasSuffix(r.URL.Path, "/machines/m1/lease") {
		http.NotFound(w, r)
		return
	}
	nonce := r.Header.Get("fly-machine-lease-nonce")
	switch {
	case r.Method == http.MethodPost && nonce != "": // RefreshLease
		a.mu.Lock()
		a.inFlight++
		a.mu.Unlock()
		select {
		case a.refreshes <- struct{}{}:
		default:
		}
		select { // the API's own pace, which the rollout must not depend on
		case <-time.After(a.refreshHold):
		case <-a.deleted:
		}
		a.mu.Lock()
		a.inFlight--
		a.grantLocked()
		a.mu.Unlock()
	case r.Method == http.MethodPost: // AcquireLease
		a.mu.Lock()
		a.grantLocked()
		a.mu.Unlock()
	case r.Method == http.MethodDelete:
		a.mu.Lock()
		a.raced = a.raced || a.inFlight > 0
		if nonce == a.nonce {
			a.nonce = ""
		}
		a.mu.Unlock()
		a.delOnce.Do(func() { close(a.deleted) })
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success"}`))
		return
	default:
		http.NotFound(w, r)
		return
	}
	a.mu.Lock()
	n := a.nonce
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"success","data":{"nonce":"` + n + `","expires_at":4102444800,"owner":"test"}}`))
}

// grantLocked refreshes the held lease, or takes a new one if none is.
func (a *slowLeaseAPI) grantLocked() {
	if a.nonce == "" {
		a.seq++
		a.nonce = "nonce-" + strconv.Itoa(a.seq)
	}
}

// TestReleaseWaitsForARefreshInFlight: a rollout that releases a lease
// while a refresh of it is still being handled must not leave a lease
// behind. Cutting the refresh short and sending the release at once let
// the API handle the release first and then the late refresh, which took
// a new lease that blocked the machine for a whole TTL (TestRolloutFaults
// found it under load: "still has a lease"). release now waits for the
// refresh's answer; only then does it release.
func TestReleaseWaitsForARefreshInFlight(t *testing.T) {
	t.Parallel() // each test runs its own sim on its own loopback addresses
	// TTL 6 s: refreshes every 2 s, each bounded by 2 s, far past the
	// API's 300 ms hold.
	api := &slowLeaseAPI{refreshHold: 300 * time.Millisecond, refreshes: make(chan struct{}, 1), deleted: make(chan struct{})}
	srv := httptest.NewServer(api)
	defer srv.Close()
	ctx := context.Background()
	m, err := newMachinesAPI(ctx, srv.URL, "test-token", nil, time.Millisecond, 10, 10*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	l, err := m.acquireLease(ctx, "app", "m1", 6*time.Second, time.Second, func(err error) { lost <- err }, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-api.refreshes:
	case <-time.After(time.Minute):
		t.Fatal("no refresh within a minute")
	}
	if err := l.release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	api.wg.Wait() // every request, the refresh included, has been handled
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.raced {
		t.Error("the release went out while a refresh was still being handled")
	}
	if api.nonce != "" {
		t.Errorf("a lease (%s) is left behind after the release", api.nonce)
	}
	select {
	case err := <-lost:
		t.Errorf("the refresher reported the lease lost: %v", err)
	default:
	}
}
