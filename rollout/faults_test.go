package rollout_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/rollout"
)

// TestRolloutFaults runs on one fleet, in order: --dry-run changes nothing;
// a lease held by someone else stops the rollout before anything changes;
// Ctrl-C mid-verification releases the lease; and a rollout through lost
// update answers and 5xx/429 statuses succeeds without deploying twice.
func TestRolloutFaults(t *testing.T) {
	t.Parallel() // each test runs its own sim on its own loopback addresses
	f := startFleet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("dry-run", func(t *testing.T) {
		before := f.apiCalls(t)
		o := f.opts("purrfly:v2")
		o.DryRun = true
		var planned int
		o.Observer = func(ev rollout.Event) {
			if ev.Phase == rollout.PhasePlan {
				planned++
			}
		}
		res, err := rollout.Run(ctx, o)
		if err != nil || !res.DryRun || planned != 3 {
			t.Fatalf("dry run: %v, %+v, %d planned", err, res, planned)
		}
		for _, mr := range res.Machines {
			if mr.Action != rollout.ActionUpdate || mr.Boot == "" {
				t.Errorf("plan for %s: %s boot %q", mr.App, mr.Action, mr.Boot)
			}
		}
		after := f.apiCalls(t)
		for action, n := range after {
			// Reads only: machines, and the balancer's secret names (its
			// ADMIN_KEY is checked before anything).
			if n != before[action] && action != "list" && action != "get" && action != "list_secrets" {
				t.Errorf("dry run made %v %s call(s)", n-before[action], action)
			}
		}
		for _, app := range f.apps {
			if updates(f.machine(t, app)) != 0 {
				t.Errorf("dry run updated %s", app)
			}
		}
	})

	t.Run("lease held by someone else", func(t *testing.T) {
		id := f.machine(t, "purrfly-relay-a").ID
		ttl := 30
		held, err := f.fc.AcquireLease(ctx, "purrfly-relay-a", id, &ttl)
		if err != nil {
			t.Fatal(err)
		}
		// A live holder refreshes its lease, so its expiry moves.
		stop := make(chan struct{})
		refreshed := make(chan struct{})
		var refreshes float64 // flysim counts a refresh as acquire_lease
		go func() {
			defer close(refreshed)
			for {
				select {
				case <-stop:
					return
				case <-time.After(1100 * time.Millisecond): // within Fly's rate limit (1/s per action and machine)
					_, _ = f.fc.RefreshLease(ctx, "purrfly-relay-a", id, &ttl, held.Data.Nonce)
					refreshes++
				}
			}
		}()
		before := f.apiCalls(t)["acquire_lease"]
		o := f.opts("purrfly:v2")
		var waited []rollout.Event
		o.Observer = func(ev rollout.Event) {
			if ev.Wait == rollout.WaitLease {
				waited = append(waited, ev)
			}
		}
		_, err = rollout.Run(ctx, o)
		close(stop)
		<-refreshed
		// A held lease is watched (find_lease), not hammered: flaps'
		// AcquireLease retries a 409 several times a second.
		if n := f.apiCalls(t)["acquire_lease"] - before - refreshes; n != 0 {
			t.Errorf("%v acquire_lease calls against a lease held throughout, want 0", n)
		}
		if rerr := f.fc.ReleaseLease(ctx, "purrfly-relay-a", id, held.Data.Nonce); rerr != nil {
			t.Fatal(rerr)
		}
		var fl *rollout.Failure
		var lh *rollout.LeaseHeldError
		if !errors.As(err, &fl) || !errors.As(err, &lh) || lh.Machine != id || fl.Machine != id {
			t.Fatalf("want a lease-held failure at %s, got %v", id, err)
		}
		// The wait said what it waited for, and until when.
		if len(waited) < 2 || waited[0].Machine != id || !strings.Contains(waited[0].Message, "held by") ||
			!waited[len(waited)-1].Until.After(waited[0].Time) {
			t.Errorf("lease wait progress: %+v", waited)
		}
		for _, app := range f.apps {
			if m := f.machine(t, app); updates(m) != 0 {
				t.Errorf("%s was updated", app)
			}
		}
		f.noLeases(t)
	})

	t.Run("interrupted", func(t *testing.T) {
		// signal.NotifyContext cancels with a cause like this one.
		signal := errors.New("interrupt signal received")
		cctx, ccancel := context.WithCancelCause(ctx)
		defer ccancel(nil)
		o := f.opts("purrfly:v2")
		o.Observer = func(ev rollout.Event) {
			if ev.Status == rollout.StatusVerifying && ev.Machine != "" {
				ccancel(signal)
			}
		}
		_, err := rollout.Run(cctx, o)
		var fl *rollout.Failure
		if !errors.As(err, &fl) || !fl.Interrupted() || fl.App != "purrfly-relay-a" || !strings.HasPrefix(fl.Reason, "interrupted: ") {
			t.Fatalf("want an interrupted failure at relay-a, got %v", err)
		}
		// The cause is said once, on one line, with what to do next.
		msg := err.Error()
		if strings.Count(msg, signal.Error()) != 1 || strings.Contains(msg, "\n") || !errors.Is(err, signal) ||
			!strings.Contains(msg, "next: its leases were released; re-run the rollout") {
			t.Errorf("interrupted failure reads %q", msg)
		}
		if m := f.machine(t, "purrfly-relay-b"); updates(m) != 0 {
			t.Errorf("relay-b was updated")
		}
		f.noLeases(t)
	})

	t.Run("lost answers and retried statuses", func(t *testing.T) {
		// The interrupted run's update of relay-a may still be stopping
		// the old process: a machine in "stopping" is redeployed, which
		// this subtest does not count on.
		testutil.Eventually(t, 20*time.Second, "relay-a to start after the interrupted run", func() bool {
			return f.machine(t, "purrfly-relay-a").State == "started"
		})
		for _, fault := range []flysim.Fault{
			{Action: "update", App: "purrfly-relay-b", DropResponse: true},
			{Action: "update", App: "purrfly-balancer", Status: 503, Times: 2},
			{Action: "get", App: "purrfly-balancer", Status: 429},
			{Action: "acquire_lease", App: "purrfly-relay-b", Status: 500},
		} {
			if err := f.sim.InjectFault(fault); err != nil {
				t.Fatal(err)
			}
		}
		res, err := rollout.Run(ctx, f.opts("purrfly:v2"))
		if err != nil {
			t.Fatalf("rollout through faults: %v", err)
		}
		for _, mr := range res.Machines {
			m := f.machine(t, mr.App)
			if updates(m) != 1 || m.Config.Image != "purrfly:v2" {
				t.Errorf("%s: %d updates (want 1), image %s, action %s", mr.App, updates(m), m.Config.Image, mr.Action)
			}
		}
		if n := f.apiCalls(t)["update"]; n < 5 {
			t.Errorf("only %v update requests reached the API; the faults were not hit", n)
		}
		f.noLeases(t)
	})
	t.Run("lease lost", func(t *testing.T) {
		o := f.opts("purrfly:v1")
		o.Env.Timeouts.MinHealthy = d(2500 * time.Millisecond) // spans two lease refreshes
		injected := false
		o.Observer = func(ev rollout.Event) {
			if ev.App == "purrfly-relay-a" && ev.Status == rollout.StatusVerifying && !injected {
				injected = true
				if err := f.sim.InjectFault(flysim.Fault{Action: "acquire_lease", App: "purrfly-relay-a", Status: 409}); err != nil {
					t.Error(err)
				}
			}
		}
		_, err := rollout.Run(ctx, o)
		var fl *rollout.Failure
		if !errors.As(err, &fl) || !errors.Is(err, rollout.ErrLeaseLost) || fl.App != "purrfly-relay-a" {
			t.Fatalf("want a lost-lease failure at relay-a, got %v", err)
		}
		if m := f.machine(t, "purrfly-relay-b"); m.Config.Image != "purrfly:v2" {
			t.Errorf("relay-b was touched: %s", m.Config.Image)
		}
		f.noLeases(t)
	})
}

// TestRolloutTakesOverAnAbandonedLease: a rollout killed with -9 leaves
// its lease until its TTL, and nobody refreshes it. The next run says so,
// waits it out and goes on; nothing is left held.
func TestRolloutTakesOverAnAbandonedLease(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := f.machine(t, "purrfly-relay-b").ID
	ttl := 4
	if _, err := f.fc.AcquireLease(ctx, "purrfly-relay-b", id, &ttl); err != nil {
		t.Fatal(err)
	}
	o := f.opts("purrfly:v2")
	var said string
	var counted bool
	o.Observer = func(ev rollout.Event) {
		if ev.Status == rollout.StatusLeasing && ev.Machine == id && strings.Contains(ev.Message, "not being refreshed") {
			said = ev.Message
		}
		counted = counted || ev.Wait == rollout.WaitTakeover && ev.Machine == id && ev.Until.After(ev.Time)
	}
	if _, err := rollout.Run(ctx, o); err != nil {
		t.Fatalf("rollout after a killed run's lease: %v", err)
	}
	if !strings.Contains(said, "taking it over when it expires") {
		t.Errorf("the wait for the abandoned lease was not announced (%q)", said)
	}
	if !counted {
		t.Error("the wait for the abandoned lease did not count down")
	}
	f.noLeases(t)
}
