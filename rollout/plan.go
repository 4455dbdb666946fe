package rollout

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/flyconfig"
	"github.com/purrfly/purrfly/wire"
)

// target is one machine of the plan. Owned by Run's goroutine.
type target struct {
	role string
	app  App
	m    *fly.Machine       // as listed; refreshed under the lease
	want *fly.MachineConfig // what the app's toml builds on the image; nil: unmanaged (image only)
	ping wire.Ping          // at plan time
	up   bool               // answered /ping at plan time
	res  *MachineResult

	// fresh: the boot being proven is new (this run created or updated the
	// machine), so a process that crashed since, even one its restart
	// policy started again, fails the proof.
	fresh bool
	// since: for a boot that is not new (verified, not deployed), when its
	// verification began: a crash from then on fails it.
	since       time.Time
	drained     string       // the boot this run drained at the balancer ("" none): undrained if the step fails
	adopt       *fly.Machine // overlap: its replacement, left by an interrupted run, to prove instead of creating one
	rollback    bool         // --rollback ran for it
	rolledBack  bool
	rollbackErr error
}

// plan lists every machine of the environment (Machines API reads and /ping
// only) and decides per machine: update, or verify when it already runs
// the image. Relays come first, in config order, except that a relay that is
// already down goes first of all: updating it cannot take a second relay
// down. Then the balancer.
func (r *run) plan(ctx context.Context) ([]*target, error) {
	var relays, bals []*target
	for i, app := range append(slices.Clone(r.env.Relays), r.env.Balancer) {
		role := RoleRelay
		if i == len(r.env.Relays) {
			role = RoleBalancer
		}
		ms, err := r.api.list(ctx, app.Name)
		if s := statusOf(err); s == http.StatusForbidden || s == http.StatusUnauthorized {
			return nil, r.forbiddenApps(ctx, []string{app.Name})
		}
		if err != nil {
			return nil, failf(err, "could not list the machines of %s", app.Name)
		}
		ms = r.withReferenced(ctx, app.Name, r.withSeed(ctx, app.Name, live(ms)))
		ms = r.leaveStandbys(app.Name, role, ms)
		var adopt map[string]*fly.Machine
		if role == RoleRelay {
			ms, adopt = r.sortRelayMachines(app, ms, &r.clean)
		}
		if role == RoleBalancer {
			if err := r.balancerHasAdminKey(ctx, app.Name); err != nil {
				return nil, err
			}
		}
		if role == RoleBalancer && len(ms) > 1 {
			return nil, tooManyBalancers(app.Name, ms, "")
		}
		want, err := r.wantConfig(ctx, &app)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			tg := &target{role: role, app: app, m: m, want: want, adopt: adopt[m.ID], fresh: r.api.madeHere(m.ID)}
			p, err := pingMachine(ctx, r.hc, app.URL, m.ID)
			tg.ping, tg.up = p, err == nil
			img := ""
			if m.Config != nil {
				img = m.Config.Image
			}
			tg.res = &MachineResult{Role: role, App: app.Name, Machine: m.ID, Region: m.Region, State: m.State,
				FromImage: img, Image: img, OldBoot: p.BootID, Boot: p.BootID, Version: versionOf(m), Action: ActionUpdate}
			if tg.want != nil {
				for _, c := range flyconfig.Diff(m.Config, tg.want) {
					if c.Path != "image" && !unstamped(c.Path, c.From) {
						tg.res.Changes = append(tg.res.Changes, c.String())
					}
				}
			}
			switch {
			case onImage(m, r.image) && len(tg.res.Changes) == 0:
				tg.res.Action = ActionVerify
			case role == RoleRelay && r.strategy == StrategyOverlap && tg.up && running(m):
				tg.res.Action = ActionReplace
			}
			if role == RoleBalancer {
				bals = append(bals, tg)
			} else {
				relays = append(relays, tg)
			}
		}
		if len(ms) == 0 {
			return nil, failf(nil, "app %s has no machine to deploy (purrctl launch %s creates what is missing)", app.Name, r.env.Name)
		}
	}
	slices.SortStableFunc(relays, func(a, b *target) int {
		switch {
		case !a.up && b.up:
			return -1
		case a.up && !b.up:
			return 1
		}
		return 0
	})
	targets := append(relays, bals...)
	r.res.Machines = make([]MachineResult, len(targets))
	for i, tg := range targets {
		r.res.Machines[i] = *tg.res
		tg.res = &r.res.Machines[i] // the slice is never grown again
	}
	r.planCleanup(&r.clean)
	for _, tg := range targets {
		msg := fmt.Sprintf("will update %s -> %s", tg.res.FromImage, r.image)
		if tg.res.FromImage == r.image {
			msg = "will update its config (same image " + r.image + ")"
		}
		if n := len(tg.res.Changes); n > 0 {
			msg += fmt.Sprintf(", %d config change(s):", n) // listed one a line by the printers (Event.Changes)
		}
		switch {
		case tg.res.Action == ActionVerify:
			msg = "already on " + r.image + ": will verify, not redeploy"
		case tg.res.Action == ActionReplace && tg.adopt != nil:
			msg = "will prove replacement " + tg.adopt.ID + " (left by an interrupted rollout), then retire this one: " + msg
		case tg.res.Action == ActionReplace:
			msg = "will create a replacement and prove it, then retire this one (its games play on): " + msg
		case tg.role == RoleRelay && r.strategy == StrategyOverlap:
			msg += "; in place: it is down, nothing to interrupt"
		}
		if !tg.up {
			msg += " (not answering /ping now)"
		}
		r.emit(Event{Phase: PhasePlan, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region, Status: StatusWaiting,
			Image: tg.res.FromImage, Boot: tg.ping.BootID, Message: msg, Changes: tg.res.Changes})
	}
	return targets, nil
}

// withSeed adds to ms, app's machines as listed, those this run's launch
// created that the list does not show yet (Fly's machine lists lag a
// create), as read now or, not found yet either, as created.
func (r *run) withSeed(ctx context.Context, app string, ms []*fly.Machine) []*fly.Machine {
	for _, c := range r.seed[app] {
		if slices.ContainsFunc(ms, func(m *fly.Machine) bool { return m.ID == c.ID }) {
			continue
		}
		if m, err := r.api.get(ctx, app, c.ID); err == nil {
			c = m
		}
		if len(live([]*fly.Machine{c})) == 1 {
			ms = append(ms, c)
		}
	}
	return ms
}

// leaveStandbys drops from ms the standby machines (a config with
// standbys: `fly machine clone --standby-for`, kept stopped for another
// machine's host failure): neither capacity nor a target, they are left
// as they are, and said so.
func (r *run) leaveStandbys(app, role string, ms []*fly.Machine) []*fly.Machine {
	return slices.DeleteFunc(ms, func(m *fly.Machine) bool {
		if !isStandby(m) {
			return false
		}
		msg := "standby for " + strings.Join(m.Config.Standbys, ", ") + ": left as it is (neither counted nor deployed)"
		if role == RoleBalancer {
			msg = "standby for " + strings.Join(m.Config.Standbys, ", ") + ": not a target; once the balancer is deployed it is put on " +
				r.image + " and the balancer's config, left stopped"
		}
		r.emit(Event{Phase: PhasePlan, App: app, Machine: m.ID, Region: m.Region, Status: StatusWaiting, Image: imageOf(m), Message: msg})
		return true
	})
}

// withReferenced adds to ms the machines their rollout metadata names (a
// retiring machine's replacement, a replacement's old machine) that the
// list does not show yet: a run killed just after creating one, re-run
// at once, finds it all the same.
func (r *run) withReferenced(ctx context.Context, app string, ms []*fly.Machine) []*fly.Machine {
	have := map[string]bool{}
	for _, m := range ms {
		have[m.ID] = true
	}
	for _, m := range slices.Clone(ms) {
		for _, id := range []string{meta(m, MetaReplacedBy), meta(m, MetaReplaces)} {
			if id == "" || have[id] {
				continue
			}
			have[id] = true
			if got, err := r.api.get(ctx, app, id); err == nil && len(live([]*fly.Machine{got})) == 1 {
				ms = append(ms, got)
			}
		}
	}
	return ms
}

// balancerHasAdminKey refuses a rollout whose balancer app has no
// ADMIN_KEY secret: the balancer refuses to start on Fly without one, and
// it is deployed last, so the fleet would end without a balancer.
func (r *run) balancerHasAdminKey(ctx context.Context, app string) error {
	names, err := r.api.secretNames(ctx, app)
	if err != nil {
		return failf(err, "could not list the secrets of %s (the balancer needs ADMIN_KEY)", app)
	}
	if !names["ADMIN_KEY"] {
		return failf(nil, "app %s has no ADMIN_KEY secret, without which the balancer refuses to start: "+
			"fly secrets set ADMIN_KEY=$(openssl rand -hex 32) -a %s --stage (or purrctl launch %s with ADMIN_KEY set), then run again", app, app, r.env.Name)
	}
	return nil
}

// tooManyBalancers refuses a balancer app with more than one live machine
// (ms): the balancer keeps its state in memory. why, if not empty, says how
// it came to be.
func tooManyBalancers(app string, ms []*fly.Machine, why string) error {
	if why != "" {
		why = ": " + why
	}
	return failf(nil, "app %s has %d machines (%s)%s; the balancer keeps its state in memory and must run exactly one: "+
		"destroy all but one (fly machine destroy ID -a %s --force) and run again", app, len(ms), machineIDs(ms), why, app)
}

// live drops destroyed and destroying machines.
func live(ms []*fly.Machine) []*fly.Machine {
	return slices.DeleteFunc(slices.Clone(ms), func(m *fly.Machine) bool {
		return m.State == "destroyed" || m.State == "destroying"
	})
}

func machineIDs(ms []*fly.Machine) string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return strings.Join(ids, ", ")
}

// onImage reports whether m is already deployed with the image and running:
// such a machine is verified (its live boot proven), not redeployed.
func onImage(m *fly.Machine, image string) bool {
	// Starting on it (an interrupted rollout's update, still coming up)
	// is verified as well: its start is waited for, not redeployed.
	return m.Config != nil && m.Config.Image == image && running(m)
}

// sameImage reports whether a FLY_IMAGE_REF seen at /ping is the target
// image: equal after normalization, or naming the digest the Machines API
// reports for the machine.
func sameImage(pingRef string, m *fly.Machine, image string) bool {
	if pingRef == "" {
		return false
	}
	if sameImageRef(pingRef, image) {
		return true
	}
	d := m.ImageRef.Digest
	return d != "" && m.Config != nil && m.Config.Image == image && strings.HasSuffix(pingRef, d)
}

// fleet reads every machine of the environment as it is now: state, image,
// live boot. Errors leave fields empty; it never fails.
func (r *run) fleet(ctx context.Context) []MachineResult {
	byID := map[string]*MachineResult{}
	for i := range r.res.Machines {
		byID[r.res.Machines[i].Machine] = &r.res.Machines[i]
	}
	var out []MachineResult
	for i, app := range append(slices.Clone(r.env.Relays), r.env.Balancer) {
		role := RoleRelay
		if i == len(r.env.Relays) {
			role = RoleBalancer
		}
		ms, err := r.api.c.List(ctx, app.Name, "")
		if err != nil {
			out = append(out, MachineResult{Role: role, App: app.Name, State: "unknown (" + r.api.shown(err).Error() + ")"})
			continue
		}
		for _, m := range ms {
			if m.State == "destroyed" {
				continue
			}
			mr := MachineResult{Role: role, App: app.Name, Machine: m.ID, Region: m.Region, State: m.State,
				Version: versionOf(m), Action: ActionUntouched}
			if m.Config != nil {
				mr.Image = m.Config.Image
			}
			if prev := byID[m.ID]; prev != nil {
				mr.FromImage, mr.OldBoot = prev.FromImage, prev.OldBoot
				mr.InterruptedRooms, mr.InterruptedConnections = prev.InterruptedRooms, prev.InterruptedConnections
				if prev.Action != ActionUpdate && prev.Action != ActionVerify {
					mr.Action = prev.Action
				}
			}
			if p, err := pingMachine(ctx, r.hc, app.URL, m.ID); err == nil {
				mr.Boot = p.BootID
			}
			out = append(out, mr)
		}
	}
	return out
}
