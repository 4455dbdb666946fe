package rollout_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

// fastRelayToml writes fly/relay.toml with short check grace periods (so
// a new machine is routable at once) and returns its path.
func fastRelayToml(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../fly/relay.toml")
	if err != nil {
		t.Fatal(err)
	}
	fast := regexp.MustCompile(`grace_period = "[0-9]+s"`).ReplaceAll(b, []byte(`grace_period = "200ms"`))
	if bytes.Equal(fast, b) {
		t.Fatal("fly/relay.toml has no grace_period to shorten")
	}
	path := filepath.Join(t.TempDir(), "relay.toml")
	if err := os.WriteFile(path, fast, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// launchedFleet launches fly/rollout.toml's sim environment (the
// multi-machine app with two machines) on v1 from a relay template with
// short grace periods, and returns it with the template's path.
func launchedFleet(t *testing.T, ctx context.Context) (*fleet, string) {
	t.Helper()
	tmpl := fastRelayToml(t)
	f := launchFleetWith(t, tmpl, false)
	for i := range f.env.Relays {
		if f.env.Relays[i].Name == multiApp {
			f.env.Relays[i].Count = 2
		}
	}
	if err := f.env.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.Launch(ctx, f.opts("purrfly:v1")); err != nil {
		t.Fatalf("launch: %v", err)
	}
	return f, tmpl
}

// relayMachines lists the started machines of every relay app, by id.
func (f *fleet) relayMachines(t *testing.T, ctx context.Context) map[string]*fly.Machine {
	t.Helper()
	out := map[string]*fly.Machine{}
	for _, a := range f.env.Relays {
		ms, err := f.fc.List(ctx, a.Name, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.State == "started" {
				out[m.ID] = m
			}
		}
	}
	return out
}

// stoppedByThemselves waits until every machine of ids has stopped and
// checks that each stopped on its own (exit 0, no stop request).
func (f *fleet) stoppedByThemselves(t *testing.T, ctx context.Context, ids map[string]*fly.Machine) {
	t.Helper()
	for id, m := range ids {
		var got *fly.Machine
		testutil.Eventually(t, 30*time.Second, "old machine "+id+" to stop by itself", func() bool {
			var err error
			got, err = f.fc.Get(ctx, appOf(f, m), id)
			return err == nil && (got.State == "stopped" || got.State == "destroyed")
		})
		for _, ev := range got.Events {
			if ev.Type != "exit" || ev.Request == nil || ev.Request.ExitEvent == nil {
				continue
			}
			if x := ev.Request.ExitEvent; x.RequestedStop || x.ExitCode != 0 || x.Signal != 0 {
				t.Errorf("old machine %s stopped with %+v, want a clean exit of its own", id, x)
			}
			break
		}
	}
}

// appOf is the app a machine belongs to (from its config's env).
func appOf(f *fleet, m *fly.Machine) string {
	for _, a := range f.env.Relays {
		if m.Config != nil && m.Config.Env["HOST_ENDPOINT"] == a.URL {
			return a.Name
		}
	}
	return ""
}

// fleetOn checks every relay app: its count of started machines, all on
// image with env GOMEMLIMIT = mem when mem is set, none other started.
func (f *fleet) fleetOn(t *testing.T, ctx context.Context, image, mem string) {
	t.Helper()
	for _, a := range f.env.Relays {
		ms, err := f.fc.List(ctx, a.Name, "")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range ms {
			if m.State != "started" {
				continue
			}
			if m.Config.Image != image || (mem != "" && m.Config.Env["GOMEMLIMIT"] != mem) {
				t.Errorf("%s: started machine %s runs %s (GOMEMLIMIT %s), want %s (%s)", a.Name, m.ID, m.Config.Image,
					m.Config.Env["GOMEMLIMIT"], image, mem)
				continue
			}
			n++
		}
		if want := max(a.Count, 1); n != want {
			t.Errorf("%s: %d started machines on %s, want its count %d", a.Name, n, image, want)
		}
	}
}

// TestOverlapRolloutInterruptsNoGame: a fleet of single-machine and
// multi-machine relay apps with games over WebSocket, UDP and both that
// outlast every drain window, and new games starting all through the
// rollout on PurrNet's retry schedule: the default (overlap) rollout
// interrupts no game and fails no allocation and no join; each old
// machine retires (listed so, apart from the new boots) and stops by
// itself once its last game has ended; afterwards every relay app has
// its count of started machines on the new image and no other. The same
// for a rollout that changes only the fly.toml, after which a re-run with
// --wait-retired finds the retired machines and destroys them.
func TestOverlapRolloutInterruptsNoGame(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, tmpl := launchedFleet(t, ctx)

	round := func(image, mem string, changed bool) {
		t.Helper()
		old := f.relayMachines(t, ctx)
		g := newGames(t, f)
		g.startN("ams", 3)
		g.startN("sea", 3)
		stopNew := make(chan struct{})
		var starting sync.WaitGroup
		starting.Go(func() { g.keepStarting([]string{"ams", "sea"}, 1500*time.Millisecond, 60, stopNew) })
		o := f.overlap(image)
		logf := rollout.PlainPrinter(testWriter{t})
		var retiringListed bool
		o.Observer = func(ev rollout.Event) {
			logf(ev)
			if ev.Phase == rollout.PhaseRegister && ev.Status == rollout.StatusDone {
				retiringListed = true
			}
		}
		res, err := rollout.Run(ctx, o)
		close(stopNew)
		starting.Wait()
		if err != nil {
			g.end()
			t.Fatalf("rollout to %s: %v", image, err)
		}
		replaced := 0
		for _, mr := range res.Machines {
			if mr.Role != rollout.RoleRelay {
				continue
			}
			if mr.Action != rollout.ActionReplaced || mr.Replacement == "" || mr.RetireBy.IsZero() || mr.InterruptedRooms != 0 {
				t.Errorf("%s %s: %+v, want replaced with nothing interrupted", mr.App, mr.Machine, mr)
			}
			if changed && len(mr.Changes) == 0 {
				t.Errorf("%s %s: no config change listed", mr.App, mr.Machine)
			}
			replaced++
		}
		if replaced != len(old) || len(res.Retiring) != len(old) || !retiringListed {
			t.Errorf("%d relay machines replaced and %d retiring, want %d each", replaced, len(res.Retiring), len(old))
		}
		insts, err := client.NewBalancer(f.env.Balancer.URL).Instances(ctx, simSecret)
		if err != nil {
			t.Fatal(err)
		}
		retiringBoots := 0
		for _, in := range insts {
			if _, isOld := old[in.MachineID]; isOld {
				if in.Status != wire.InstanceRetiring || in.RetireBy == "" {
					t.Errorf("old machine %s listed %s (retire by %q), want retiring", in.MachineID, in.Status, in.RetireBy)
				}
				retiringBoots++
			}
		}
		g.end()
		f.stoppedByThemselves(t, ctx, old)
		f.fleetOn(t, ctx, image, mem)
		t.Logf("retiring boots listed right after the rollout: %d", retiringBoots)
	}

	round("purrfly:v2", "", false)

	// Only the toml changes.
	b, err := os.ReadFile(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(b, []byte(`GOMEMLIMIT = "430MiB"`), []byte(`GOMEMLIMIT = "400MiB"`), 1)
	if bytes.Equal(edited, b) {
		t.Fatal("fly/relay.toml has no GOMEMLIMIT = \"430MiB\" to edit")
	}
	if err := os.WriteFile(tmpl, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.env.Validate(); err != nil {
		t.Fatal(err)
	}
	round("purrfly:v2", "400MiB", true)

	// A re-run converges: nothing to deploy, the stopped retired machines
	// destroyed, nothing left retiring.
	o := f.overlap("purrfly:v2")
	o.WaitRetired = true
	o.Observer = rollout.PlainPrinter(testWriter{t})
	res, err := rollout.Run(ctx, o)
	if err != nil {
		t.Fatalf("re-run: %v", err)
	}
	for _, mr := range res.Machines {
		if mr.Action != rollout.ActionVerified {
			t.Errorf("re-run: %s %s %s, want verified", mr.App, mr.Machine, mr.Action)
		}
	}
	if len(res.Destroyed) == 0 {
		t.Error("re-run destroyed no retired machine")
	}
	for _, a := range f.env.Relays {
		ms, err := f.fc.List(ctx, a.Name, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.State != "started" {
				t.Errorf("machine %s of %s left %s after the re-run", m.ID, a.Name, m.State)
			}
		}
	}
	f.noLeases(t)
}
