package rollout_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

// TestOverlapFailedReplacementInterruptsNothing: a replacement that fails
// its proof, each way it can (the image refused, a process that never
// starts, a relay that is never ready, a wrong SECRET), is destroyed and
// the old machine was never retired: the games on it play on, nothing is
// left retiring or draining, no lease is held, the failure names the
// machine (and, with --rollback, says the machine runs its previous image
// as a rollback would, exit 3); a plain re-run then succeeds.
func TestOverlapFailedReplacementInterruptsNothing(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	f.env.Timeouts.Wait = d(6 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := newGames(t, f)
	g.startN("ams", 3)
	g.startN("sea", 1)
	oldA := f.machine(t, "purrfly-relay-a")
	bootA := ping(t, f, "purrfly-relay-a", oldA.ID).BootID

	secret := func(name string, value *string) {
		t.Helper()
		if _, err := f.fc.UpdateAppSecrets(ctx, "purrfly-relay-a", map[string]*string{name: value}); err != nil {
			t.Fatal(err)
		}
	}
	wrong, nowhere := "not-the-fleets-secret", "http://127.0.0.1:9"
	for _, c := range []struct {
		name, image, why string
		before, after    func()
		rollback         bool
	}{
		{name: "image refused", image: "purrfly:nope", why: "refused the replacement"},
		{name: "never started", image: "purrfly:broken", why: "exited with code 1"},
		{name: "wrong SECRET", image: "purrfly:v2", why: "SECRET",
			before: func() { secret("SECRET", &wrong) }, after: func() { v := simSecret; secret("SECRET", &v) }},
		{name: "never ready", image: "purrfly:v2", why: "unreachable", rollback: true,
			before: func() { secret("BALANCER_URL", &nowhere) }, after: func() { secret("BALANCER_URL", nil) }},
	} {
		if c.before != nil {
			c.before()
		}
		o := f.overlap(c.image)
		o.Rollback = c.rollback
		o.Observer = rollout.PlainPrinter(testWriter{t})
		_, err := rollout.Run(ctx, o)
		if c.after != nil {
			c.after()
		}
		var fl *rollout.Failure
		if !errors.As(err, &fl) || fl.App != "purrfly-relay-a" || fl.Machine != oldA.ID || !strings.Contains(fl.Error(), c.why) {
			t.Fatalf("%s: %v, want a failure at machine %s naming %q", c.name, err, oldA.ID, c.why)
		}
		if fl.RolledBack != c.rollback {
			t.Errorf("%s: rolled back %v, want %v", c.name, fl.RolledBack, c.rollback)
		}
		// The old machine alone, untouched: same boot, not retiring;
		// the replacement gone; nothing retiring or draining; no lease.
		if m := f.machine(t, "purrfly-relay-a"); m.ID != oldA.ID || m.Config.Metadata[rollout.MetaRole] != "" {
			t.Errorf("%s: relay-a has machine %s (role %q), want only %s unmarked", c.name, m.ID, m.Config.Metadata[rollout.MetaRole], oldA.ID)
		}
		if p := ping(t, f, "purrfly-relay-a", oldA.ID); p.BootID != bootA || p.Retiring || p.Draining {
			t.Errorf("%s: relay-a answers %+v, want boot %s serving", c.name, p, bootA)
		}
		insts, err := client.NewBalancer(f.env.Balancer.URL).Instances(ctx, simSecret)
		if err != nil || len(insts) != 2 {
			t.Fatalf("%s: balancer lists %d relays (%v)", c.name, len(insts), err)
		}
		for _, in := range insts {
			if in.Status != wire.InstanceLive {
				t.Errorf("%s: %s listed %s, want live", c.name, in.MachineID, in.Status)
			}
		}
		f.noLeases(t)
	}
	res, err := rollout.Run(ctx, f.overlap("purrfly:v2"))
	if err != nil {
		t.Fatalf("plain re-run: %v", err)
	}
	for _, mr := range res.Machines {
		if mr.Role == rollout.RoleRelay && mr.Action != rollout.ActionReplaced {
			t.Errorf("re-run: %s %s %s, want replaced", mr.App, mr.Machine, mr.Action)
		}
	}
	g.end()
}
