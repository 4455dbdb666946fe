package rollout

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/testutil"
)

// TestRateLimitedCallWaitsRetryAfter: a 429 is sent again, body and all,
// once its Retry-After has passed on the run's clock, and not before.
func TestRateLimitedCallWaitsRetryAfter(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		_ = json.NewDecoder(r.Body).Decode(&in)
		mu.Lock()
		bodies = append(bodies, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if calls.Add(1) <= 2 {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":"rate limit exceeded"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"m1","state":"started","instance_id":"01INST"}`))
	}))
	defer srv.Close()
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	api, err := newMachinesAPI(t.Context(), srv.URL, "token", nil, time.Millisecond, 100, time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	api.clock, api.limit.clock, api.tr.clock = clk, clk, clk
	done := make(chan error, 1)
	go func() {
		_, err := api.c.Update(t.Context(), "a", fly.LaunchMachineInput{ID: "m1", Config: &fly.MachineConfig{Image: "x"}}, "")
		done <- err
	}()
	for want := int32(1); want <= 2; want++ {
		if !testutil.Poll(5*time.Second, func() bool { return calls.Load() == want && clk.Waiters() == 1 }) {
			t.Fatalf("call %d: %d calls, %d waiters", want, calls.Load(), clk.Waiters())
		}
		clk.Advance(3*time.Second - time.Millisecond)
		if calls.Load() != want {
			t.Fatalf("sent again before Retry-After passed")
		}
		clk.Advance(time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("update after two 429s: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the update never ended")
	}
	if calls.Load() != 3 {
		t.Fatalf("%d requests, want 3", calls.Load())
	}
	for _, d := range []struct {
		v    string
		want time.Duration
	}{{"", time.Second}, {"0", time.Second}, {"2", 2 * time.Second}, {"3600", maxRetryAfter}, {"soon", time.Second}} {
		if got := retryAfter(d.v); got != d.want {
			t.Errorf("retryAfter(%q) = %s, want %s", d.v, got, d.want)
		}
	}
}

// TestWaitNamesTheInstance: a wait flaps pins with ?version= also names it
// ?instance_id=, the parameter of Fly's spec; a machine's version is its
// instance_id when it has one.
func TestWaitNamesTheInstance(t *testing.T) {
	queries := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries <- r.URL.RawQuery
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	api, err := newMachinesAPI(t.Context(), srv.URL, "token", nil, 0, 0, time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.waitStarted(t.Context(), "a", "m1", "01INST", time.Second); err != nil {
		t.Fatal(err)
	}
	if q := <-queries; !strings.Contains(q, "instance_id=01INST") || !strings.Contains(q, "version=01INST") {
		t.Fatalf("wait query %q: want instance_id and version", q)
	}
	for _, c := range []struct {
		m    fly.Machine
		want string
	}{{fly.Machine{InstanceID: "i", Version: "v"}, "i"}, {fly.Machine{Version: "v"}, "v"}, {fly.Machine{InstanceID: "i"}, "i"}} {
		if got := versionOf(&c.m); got != c.want {
			t.Errorf("versionOf(%+v) = %q, want %q", c.m, got, c.want)
		}
	}
}

// TestFreshMachineNotFoundIsRetried: a 404 for a machine this run just
// created is Fly not showing it yet (retried); for any other, an answer.
func TestFreshMachineNotFoundIsRetried(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gets.Add(1) <= 2 {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"machine not found"}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"new","state":"created"}`))
	}))
	defer srv.Close()
	api, err := newMachinesAPI(t.Context(), srv.URL, "token", nil, time.Millisecond, 100, time.Millisecond, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.get(t.Context(), "a", "old"); statusOf(err) != http.StatusNotFound || gets.Load() != 1 {
		t.Fatalf("get of a machine not made here: %v after %d requests, want one 404", err, gets.Load())
	}
	api.created("new")
	if m, err := api.get(t.Context(), "a", "new"); err != nil || m.ID != "new" {
		t.Fatalf("get of a machine just made: %v %v", m, err)
	}
	if gets.Load() != 3 {
		t.Fatalf("%d requests, want 3 (a 404, then found)", gets.Load())
	}
}

// TestCrashedSince: a new boot whose process failed and was started again
// by its restart policy is said as crashed; a clean exit, a requested
// stop and an exit from before the update are not.
func TestCrashedSince(t *testing.T) {
	exit := func(code int, requested, restarting bool, count int) *fly.MachineEvent {
		return &fly.MachineEvent{Type: "exit", Request: &fly.MachineRequest{RestartCount: count,
			ExitEvent: &fly.MachineExitEvent{ExitCode: code, RequestedStop: requested, Restarting: restarting}}}
	}
	update := &fly.MachineEvent{Type: "update"}
	for _, c := range []struct {
		events []*fly.MachineEvent
		want   string
	}{
		{[]*fly.MachineEvent{{Type: "start"}, exit(1, false, true, 2), update}, "exited with code 1 and its restart policy started it again (restart 2)"},
		{[]*fly.MachineEvent{{Type: "start"}, exit(0, false, false, 0), update}, ""},
		{[]*fly.MachineEvent{{Type: "start"}, exit(0, true, false, 0), update}, ""},
		{[]*fly.MachineEvent{{Type: "start"}, update, exit(1, false, true, 1)}, ""},
	} {
		got := crashedSince(&fly.Machine{State: "started", Events: c.events}, time.Time{})
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("crashedSince = %q, want %q", got, c.want)
		}
	}
	// A machine verified, not deployed: only a crash since its
	// verification began counts.
	at := time.Unix(1_800_000_000, 0)
	old, recent := exit(1, false, true, 1), exit(1, false, true, 2)
	old.Timestamp, recent.Timestamp = at.Add(-time.Minute).UnixMilli(), at.Add(time.Second).UnixMilli()
	if got := crashedSince(&fly.Machine{Events: []*fly.MachineEvent{old, update}}, at); got != "" {
		t.Errorf("a crash before the verification: %q", got)
	}
	if got := crashedSince(&fly.Machine{Events: []*fly.MachineEvent{recent, old, update}}, at); !strings.Contains(got, "restart 2") {
		t.Errorf("a crash during the verification: %q", got)
	}
}
