package rollout_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

// TestRolloutBrokenImage: an image whose process exits stops the rollout at
// the first relay with a clear reason and the fleet table; nothing after it
// is touched. --rollback restores the machine to its previous image with a
// proven new boot; without it the machine stays stopped, and a later good
// rollout converges the whole fleet (the stopped relay first).
func TestRolloutBrokenImage(t *testing.T) {
	t.Parallel() // each test runs its own sim on its own loopback addresses
	f := startFleet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	relayA := f.machine(t, "purrfly-relay-a").ID
	untouched := func() {
		t.Helper()
		for _, app := range f.apps[1:] {
			m := f.machine(t, app)
			if updates(m) != 0 || m.Config.Image != "purrfly:v1" || m.State != "started" {
				t.Errorf("%s was touched: %d updates, image %s, state %s", app, updates(m), m.Config.Image, m.State)
			}
		}
	}
	bootB := ping(t, f, "purrfly-relay-b", f.machine(t, "purrfly-relay-b").ID).BootID

	// With --rollback.
	o := f.opts("purrfly:broken")
	o.Rollback = true
	_, err := rollout.Run(ctx, o)
	var fl *rollout.Failure
	if !errors.As(err, &fl) {
		t.Fatalf("want a *Failure, got %v", err)
	}
	if fl.Machine != relayA || fl.Phase != rollout.PhaseRelays || !strings.Contains(fl.Reason, "exited with code 1") ||
		strings.HasPrefix(fl.Reason, "interrupted") || fl.Interrupted() {
		t.Errorf("failure at %s/%s: %q", fl.Phase, fl.Machine, fl.Reason)
	}
	if !fl.Rollback || !fl.RolledBack || fl.RollbackErr != nil {
		t.Errorf("rollback: ran %v, ok %v, err %v", fl.Rollback, fl.RolledBack, fl.RollbackErr)
	}
	m := f.machine(t, "purrfly-relay-a")
	p := ping(t, f, "purrfly-relay-a", relayA)
	if m.Config.Image != "purrfly:v1" || p.ImageRef != "registry.fly.io/purrfly:v1" || updates(m) != 2 {
		t.Errorf("after rollback: image %s, /ping %s, %d updates", m.Config.Image, p.ImageRef, updates(m))
	}
	if len(fl.Fleet) != 3 || fl.Fleet[0].Action != rollout.ActionRolledBack || fl.Fleet[0].Boot != p.BootID {
		t.Errorf("fleet table: %+v", fl.Fleet)
	}
	for _, mr := range fl.Fleet {
		if want := map[bool]string{true: rollout.RoleBalancer, false: rollout.RoleRelay}[mr.App == "purrfly-balancer"]; mr.Role != want {
			t.Errorf("fleet table: %s is a %s, want a %s", mr.App, mr.Role, want)
		}
	}
	untouched()
	f.noLeases(t)

	// Without --rollback: the machine stays on the broken image, the rest
	// as it was. Its restart policy (Fly's default, on-failure) keeps
	// starting it again: the rollout fails it at its first crash all the
	// same, not when its restarts run out. The boot it drained is dead
	// (the update replaced it): it is not "given back" (which would let
	// the balancer place rooms on it until its probe fails).
	var said []rollout.Event
	o = f.opts("purrfly:broken")
	o.Observer = func(ev rollout.Event) { said = append(said, ev) }
	_, err = rollout.Run(ctx, o)
	if !errors.As(err, &fl) || fl.Machine != relayA || fl.Rollback || !strings.Contains(fl.Reason, "exited with code 1") {
		t.Fatalf("second failure: %v", err)
	}
	gone := false
	for _, ev := range said {
		if strings.Contains(ev.Message, "takes new rooms again") {
			t.Errorf("the dead boot was given back: %q", ev.Message)
		}
		gone = gone || strings.Contains(ev.Message, "is gone") && strings.Contains(ev.Message, "nothing to give back")
	}
	if !gone {
		t.Error("no event said the drained boot is gone with its update")
	}
	if m := f.machine(t, "purrfly-relay-a"); m.Config.Image != "purrfly:broken" || m.Config.Restart == nil || m.Config.Restart.Policy != "on-failure" {
		t.Errorf("broken machine: state %s image %s restart %+v", m.State, m.Config.Image, m.Config.Restart)
	}
	var sb strings.Builder
	rollout.WriteFleet(&sb, fl.Fleet)
	if !strings.Contains(sb.String(), "purrfly:broken") || !strings.Contains(sb.String(), bootB) {
		t.Errorf("fleet table does not show the broken image and relay-b's boot:\n%s", sb.String())
	}
	untouched()
	f.noLeases(t)

	// No running relay is left draining: the broken boot never registered,
	// and the drained boot it replaced is dead (the balancer lists it
	// until its heartbeats expire; nothing is placed there meanwhile).
	insts, err := client.NewBalancer(f.env.Balancer.URL).Instances(ctx, simSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range insts {
		if in.Status != wire.InstanceDraining {
			continue
		}
		for _, app := range f.apps[:2] {
			if m := f.machine(t, app); m.ID == in.MachineID && m.State == "started" && ping(t, f, app, m.ID).BootID == in.BootID {
				t.Errorf("after the broken image %s runs boot %s, still draining", in.MachineID, in.BootID)
			}
		}
	}

	// --rollback on a re-run while the machine is already on the broken
	// image: there is nothing earlier to go back to, and it says so rather
	// than "rolling back" to the broken image.
	said = nil
	o = f.opts("purrfly:broken")
	o.Rollback, o.Observer = true, func(ev rollout.Event) { said = append(said, ev) }
	_, err = rollout.Run(ctx, o)
	if !errors.As(err, &fl) || fl.Machine != relayA || fl.Rollback || fl.RolledBack {
		t.Fatalf("re-run with --rollback: %v (rollback ran %v)", err, fl != nil && fl.Rollback)
	}
	nothing := false
	for _, ev := range said {
		if ev.Status == rollout.StatusRollingBack {
			t.Errorf("it rolled back to %s: %q", ev.Image, ev.Message)
		}
		nothing = nothing || strings.Contains(ev.Message, "nothing to roll back to")
	}
	if !nothing {
		t.Error("no event said there was nothing to roll back to")
	}
	f.noLeases(t)

	// A good image converges everything.
	res, err := rollout.Run(ctx, f.opts("purrfly:v2"))
	if err != nil {
		t.Fatalf("recovery rollout: %v", err)
	}
	for _, mr := range res.Machines {
		if mr.Action != rollout.ActionUpdated {
			t.Errorf("%s: %s", mr.App, mr.Action)
		}
	}
}

// TestRolloutRelayNeverRegisters: a relay whose new boot the balancer never
// lists (its SECRET is not the balancer's) stops the rollout there, with
// the relay's own reason from /ready; the balancer is not touched.
func TestRolloutRelayNeverRegisters(t *testing.T) {
	t.Parallel() // each test runs its own sim on its own loopback addresses
	f := startFleet(t, func(c *flysim.Config) {
		for _, a := range c.Apps {
			if a.Name == "purrfly-relay-b" {
				a.Secrets["SECRET"] = "not-the-balancers"
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := f.opts("purrfly:v2")
	// The wait is spent in full (the boot never registers), so it is short,
	// yet long enough to start the machine, prove its boot and keep it
	// healthy for MinHealthy under load, so that the balancer is asked.
	o.Env.Timeouts.Wait = d(8 * time.Second)
	_, err := rollout.Run(ctx, o)
	var fl *rollout.Failure
	if !errors.As(err, &fl) {
		t.Fatalf("want a *Failure, got %v", err)
	}
	if fl.App != "purrfly-relay-b" || !strings.Contains(fl.Reason, "refused this relay's credential (unauthorized): relay and balancer must share one SECRET") ||
		strings.Contains(fl.Reason, "not-the-balancers") {
		t.Errorf("failure at %s: %q", fl.App, fl.Reason)
	}
	if m := f.machine(t, "purrfly-balancer"); updates(m) != 0 {
		t.Errorf("balancer was updated")
	}
	if m := f.machine(t, "purrfly-relay-a"); updates(m) != 1 || m.Config.Image != "purrfly:v2" {
		t.Errorf("relay-a: %d updates, image %s", updates(m), m.Config.Image)
	}
	f.noLeases(t)
}

// TestRolloutRefusedImageUndrains: an image the Machines API refuses
// fails the step after its relay was drained; the rollout gives that
// relay back (its old boot, still running, is live again at the balancer
// and takes new rooms), says so, touches nothing else, and a plain re-run
// with a good image succeeds.
func TestRolloutRefusedImageUndrains(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	relayA := f.machine(t, "purrfly-relay-a").ID
	// Each failure comes after relay-a's drain; each is followed by a
	// plain re-run that must converge.
	for _, tc := range []struct {
		name, image, reason string
		fault               *flysim.Fault
	}{
		{name: "image refused", image: "purrfly:not-in-the-registry", reason: "refused the update"},
		{name: "update API error", image: "purrfly:v1", reason: "refused the update",
			fault: &flysim.Fault{Action: "update", App: "purrfly-relay-a", Status: 500, Times: 2}}, // = APITries below
	} {
		bootA := ping(t, f, "purrfly-relay-a", relayA).BootID
		before := map[string]int{}
		for _, app := range f.apps[1:] {
			before[app] = updates(f.machine(t, app))
		}
		if tc.fault != nil {
			if err := f.sim.InjectFault(*tc.fault); err != nil {
				t.Fatal(err)
			}
		}
		var events []rollout.Event
		o := f.opts(tc.image)
		o.APITries = 2
		o.Observer = func(ev rollout.Event) { events = append(events, ev) }
		_, err := rollout.Run(ctx, o)
		var fl *rollout.Failure
		if !errors.As(err, &fl) || fl.Machine != relayA || !strings.Contains(fl.Reason, tc.reason) {
			t.Fatalf("%s: want the update of %s refused, got %v", tc.name, relayA, err)
		}
		var said bool
		for _, ev := range events {
			said = said || (ev.Status == rollout.StatusUndrained && ev.Boot == bootA && strings.Contains(ev.Message, "takes new rooms again"))
		}
		if !said {
			t.Errorf("%s: no undrained event for boot %s among %d events", tc.name, bootA, len(events))
		}
		insts, err := client.NewBalancer(f.env.Balancer.URL).Instances(ctx, simSecret)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range insts {
			if in.Status != wire.InstanceLive {
				t.Errorf("%s: after the failure %s (boot %s) is %s, want live", tc.name, in.MachineID, in.BootID, in.Status)
			}
		}
		if p := ping(t, f, "purrfly-relay-a", relayA); p.BootID != bootA || p.Draining {
			t.Errorf("%s: relay-a after the failed update: boot %s draining %v, want %s serving", tc.name, p.BootID, p.Draining, bootA)
		}
		for _, app := range f.apps[1:] {
			if n := updates(f.machine(t, app)); n != before[app] {
				t.Errorf("%s: %s was updated", tc.name, app)
			}
		}
		f.noLeases(t)
		if _, err := rollout.Run(ctx, f.opts("purrfly:v2")); err != nil {
			t.Fatalf("%s: re-run with a good image: %v", tc.name, err)
		}
	}
}

// TestRolloutAppWithoutMachines: an environment naming an app that has no
// machine (never launched, or all destroyed) stops at the plan, touching
// nothing.
func TestRolloutAppWithoutMachines(t *testing.T) {
	t.Parallel()
	f := startFleet(t, func(c *flysim.Config) {
		for _, a := range c.Apps {
			if a.Name == "purrfly-relay-b" {
				a.Machines = nil
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := rollout.Run(ctx, f.opts("purrfly:v2"))
	var fl *rollout.Failure
	if !errors.As(err, &fl) || fl.Phase != rollout.PhasePlan || !strings.Contains(fl.Reason, "app purrfly-relay-b has no machine to deploy") {
		t.Fatalf("want a plan failure naming the empty app, got %v", err)
	}
	if m := f.machine(t, "purrfly-relay-a"); updates(m) != 0 {
		t.Error("relay-a was updated")
	}
}

// TestRolloutUnhealthyNewBoot: a new boot that starts but never becomes
// ready (this image's relay runs with a SECRET the balancer refuses) stops
// the rollout at that machine with the relay's reason; nothing is left
// draining or leased, the rest is untouched, and a plain re-run with a good
// image converges.
func TestRolloutUnhealthyNewBoot(t *testing.T) {
	t.Parallel()
	f := startFleet(t, func(c *flysim.Config) {
		// init.cmd ("relay") arrives as $0; the flag wins over SECRET.
		c.Images["purrfly:unready"] = &flysim.Image{Command: []string{"/bin/sh", "-c", `exec {exe} "$0" --secret not-the-balancers`}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	relayA := f.machine(t, "purrfly-relay-a").ID
	_, err := rollout.Run(ctx, f.opts("purrfly:unready"))
	var fl *rollout.Failure
	if !errors.As(err, &fl) || fl.Machine != relayA || !strings.Contains(fl.Reason, "SECRET") {
		t.Fatalf("want relay-a's new boot not ready for its SECRET, got %v", err)
	}
	for _, app := range f.apps[1:] {
		if n := updates(f.machine(t, app)); n != 0 {
			t.Errorf("%s was updated", app)
		}
	}
	insts, err := client.NewBalancer(f.env.Balancer.URL).Instances(ctx, simSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range insts {
		if in.Status == wire.InstanceDraining {
			t.Errorf("after the failure %s (boot %s) is draining", in.MachineID, in.BootID)
		}
	}
	if p := ping(t, f, "purrfly-relay-a", relayA); p.Draining {
		t.Errorf("relay-a's new boot %s is draining", p.BootID)
	}
	f.noLeases(t)
	if _, err := rollout.Run(ctx, f.opts("purrfly:v2")); err != nil {
		t.Fatalf("re-run with a good image: %v", err)
	}
}

// TestRolloutRefusesASecondBalancer: the balancer keeps its state in
// memory, so a second machine of its app (a manual clone, a scale-up)
// would split the fleet's rooms. Rollout stops at the plan, names the fix,
// and touches nothing.
func TestRolloutRefusesASecondBalancer(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bal := f.machine(t, "purrfly-balancer")
	clone, err := f.fc.Launch(ctx, "purrfly-balancer", fly.LaunchMachineInput{Region: bal.Region, Config: bal.Config, SkipLaunch: true})
	if err != nil {
		t.Fatal(err)
	}
	f.listed(t, "purrfly-balancer", 2) // a plan sees what Fly's list shows
	_, err = rollout.Run(ctx, f.opts("purrfly:v2"))
	var fl *rollout.Failure
	if !errors.As(err, &fl) || fl.Phase != rollout.PhasePlan || !strings.Contains(fl.Reason, "must run exactly one") ||
		!strings.Contains(fl.Reason, clone.ID) || !strings.Contains(fl.Reason, "fly machine destroy") {
		t.Fatalf("want the plan refused over two balancer machines, got %v", err)
	}
	for _, app := range f.apps[:2] {
		if n := updates(f.machine(t, app)); n != 0 {
			t.Errorf("%s was updated", app)
		}
	}

	// A standby (flyctl's `machine clone --standby-for`) is no second
	// balancer: it is left alone, neither counted nor deployed.
	if err := f.fc.Destroy(ctx, "purrfly-balancer", fly.RemoveMachineInput{ID: clone.ID, Kill: true}, ""); err != nil {
		t.Fatal(err)
	}
	cfg := *bal.Config
	cfg.Standbys = []string{bal.ID}
	standby, err := f.fc.Launch(ctx, "purrfly-balancer", fly.LaunchMachineInput{Region: bal.Region, Config: &cfg, SkipLaunch: true})
	if err != nil {
		t.Fatal(err)
	}
	f.listed(t, "purrfly-balancer", 2)
	dry := f.opts("purrfly:v2")
	dry.DryRun = true
	var said bool
	dry.Observer = func(ev rollout.Event) {
		said = said || ev.Machine == standby.ID && strings.Contains(ev.Message, "standby for "+bal.ID)
	}
	plan, err := rollout.Run(ctx, dry)
	if err != nil || !said {
		t.Fatalf("dry run beside a standby balancer: %v (standby said: %v)", err, said)
	}
	for _, m := range plan.Machines {
		if m.Machine == standby.ID {
			t.Errorf("the standby is in the plan: %+v", m)
		}
	}
}

// TestRolloutRefusesABalancerWithoutAdminKey: the balancer refuses to
// start on Fly without ADMIN_KEY and goes last; a fleet from before the
// admin API would end without one, so the plan stops first, naming the fix.
func TestRolloutRefusesABalancerWithoutAdminKey(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := f.fc.DeleteAppSecret(ctx, "purrfly-balancer", "ADMIN_KEY"); err != nil {
		t.Fatal(err)
	}
	_, err := rollout.Run(ctx, f.opts("purrfly:v2"))
	var fl *rollout.Failure
	if !errors.As(err, &fl) || fl.Phase != rollout.PhasePlan || !strings.Contains(fl.Reason, "fly secrets set ADMIN_KEY") {
		t.Fatalf("want the plan refused for the missing ADMIN_KEY, got %v", err)
	}
	for _, app := range f.apps {
		if n := updates(f.machine(t, app)); n != 0 {
			t.Errorf("%s was updated", app)
		}
	}
}
