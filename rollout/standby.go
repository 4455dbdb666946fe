package rollout

import (
	"context"
	"fmt"
	"slices"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/flyconfig"
	"github.com/purrfly/purrfly/wire"
)

// The balancer's standby: a stopped machine of the balancer app whose
// config lists the primary in standbys (Fly starts it when the primary's
// host fails) and carries wire.EnvBalancerStandbyFor (the balancer then
// serves only while the primary does not answer). Otherwise its config is
// the primary's: launch creates it once the primary is proven, and every
// rollout keeps it on the primary's image and config, never starting it.

// standbyConfig is the standby's config for primary: want (the primary's)
// with standbys and the env naming it.
func standbyConfig(want *fly.MachineConfig, primary string) (*fly.MachineConfig, error) {
	cfg, err := copyConfig(want)
	if err != nil {
		return nil, err
	}
	cfg.Standbys = []string{primary}
	if cfg.Env == nil {
		cfg.Env = map[string]string{}
	}
	cfg.Env[wire.EnvBalancerStandbyFor] = primary
	return cfg, nil
}

// isStandby reports whether m stands by for another machine.
func isStandby(m *fly.Machine) bool { return m.Config != nil && len(m.Config.Standbys) > 0 }

// launchStandby creates the balancer's standby for primary unless one of
// have (the app's live machines) already stands by for it.
func (r *run) launchStandby(ctx context.Context, a *App, primary string, have []*fly.Machine, created func(string)) error {
	for _, m := range have {
		if isStandby(m) && slices.Contains(m.Config.Standbys, primary) {
			return nil
		}
	}
	if r.opts.DryRun {
		created(fmt.Sprintf("standby machine of %s in %s (stopped; Fly starts it if %s's host fails)", a.Name, a.region(), primaryOrNew(primary)))
		r.res.Machines = append(r.res.Machines, MachineResult{Role: RoleBalancer, App: a.Name, Region: a.region(), Image: r.image,
			State: "stopped (standby)", Action: ActionCreate})
		return nil
	}
	cfg, err := standbyConfig(a.MachineConfig(r.image), primary)
	if err != nil {
		return err
	}
	m, err := r.api.launchWith(ctx, a.Name, a.region(), cfg, 0, true)
	if err != nil {
		return failf(err, "could not create the standby of balancer machine %s", primary)
	}
	created(fmt.Sprintf("standby machine %s of %s in %s (stopped; Fly starts it if %s's host fails)", m.ID, a.Name, a.region(), primary))
	return nil
}

func primaryOrNew(id string) string {
	if id == "" {
		return "the new balancer machine"
	}
	return id
}

// keepStandbys puts every standby of the balancer app for primary on the
// image and config the primary was deployed with (an update that leaves it
// stopped), then reads each back: its config must match, and it must not
// run. Standbys of another machine are left alone.
func (r *run) keepStandbys(ctx context.Context, a App, primary string) error {
	ms, err := r.api.list(ctx, a.Name)
	if err != nil {
		return failf(err, "could not list the machines of %s for its standby", a.Name)
	}
	for _, m := range live(ms) {
		if !isStandby(m) || !slices.Contains(m.Config.Standbys, primary) {
			continue
		}
		want, err := standbyConfig(a.MachineConfig(r.image), primary)
		if err != nil {
			return err
		}
		diff := flyconfig.Diff(m.Config, want)
		msg := "standby for " + primary + ": already on " + r.image + " and the primary's config"
		if len(diff) > 0 {
			if _, err := r.api.updateWith(ctx, a.Name, m, want, "", true); err != nil {
				return failf(err, "could not update standby %s", m.ID)
			}
			msg = fmt.Sprintf("standby for %s: updated to %s and the primary's config (%d change(s)), left stopped", primary, r.image, len(diff))
		}
		got, err := r.api.get(ctx, a.Name, m.ID)
		if err != nil {
			return failf(err, "could not read standby %s back", m.ID)
		}
		if d := flyconfig.Diff(got.Config, want); len(d) > 0 {
			return failf(nil, "standby %s does not carry the config it was given: %s", m.ID, d[0].String())
		}
		if got.State == "started" || got.State == "starting" {
			return failf(nil, "standby %s is %s: a standby must stay stopped until Fly starts it", m.ID, got.State)
		}
		r.emit(Event{Phase: PhaseBalancer, App: a.Name, Machine: m.ID, Region: m.Region, Status: StatusDone, Image: r.image, Message: msg})
	}
	return nil
}
