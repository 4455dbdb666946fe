package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/flyconfig"
	"github.com/purrfly/purrfly/wire"
)

// The overlap strategy (the default): a relay machine is replaced, not
// updated. Its replacement, a new machine in the same app and region with
// the whole new config, is proven exactly as an updated machine is (a new
// boot of the image at /ping through fly-force-instance-id, healthy for
// the minimum time, ready, its Fly checks passing, listed live by the
// balancer, which lists a boot live only once players reach it); only
// then is the old machine retired (metadata first, then the relay itself,
// wire.PathRelayRetire): it takes no new room, its games play on, and it
// stops by itself when the last one has ended, retire_after at the latest.
// A replacement that fails its proof is destroyed; the old machine was
// never touched. The rollout never waits for games.

// cleanup is what the plan found besides the machines to deploy: left by
// earlier runs, to be put in order before any machine is touched. Owned
// by Run's goroutine.
type cleanup struct {
	retiring []found // machines a rollout retired (role retiring)
	adopted  []found // replacements whose old machine retired or is gone: ordinary machines now
	strays   []found // replacements of an interrupted run that will not be adopted
}

// found is one machine of a relay app found in the plan.
type found struct {
	app App
	m   *fly.Machine
}

// sortRelayMachines splits one relay app's live machines: the ones to
// deploy (ordinary machines, and replacements whose old machine has
// retired or is gone), and the rest into c. A replacement of a machine
// that does not retire yet (its run was interrupted before it retired
// the old one) is adopted when it runs the image and config this rollout
// wants: the map answers it by the machine it replaces, and that machine's
// step proves it instead of creating another. Any other such replacement
// is a stray.
func (r *run) sortRelayMachines(app App, ms []*fly.Machine, c *cleanup) ([]*fly.Machine, map[string]*fly.Machine) {
	byID := map[string]*fly.Machine{}
	for _, m := range ms {
		byID[m.ID] = m
	}
	var deploy []*fly.Machine
	adopt := map[string]*fly.Machine{}
	want := app.MachineConfig(r.image)
	for _, m := range ms {
		switch {
		case retiring(m):
			c.retiring = append(c.retiring, found{app, m})
		case meta(m, MetaRole) == RoleReplacement:
			old := byID[meta(m, MetaReplaces)]
			switch {
			case old == nil || retiring(old):
				c.adopted = append(c.adopted, found{app, m})
				deploy = append(deploy, m)
			case adopt[old.ID] == nil && running(m) && onImage(m, r.image) && (want == nil || len(flyconfig.Diff(m.Config, want)) == 0):
				adopt[old.ID] = m
			default:
				c.strays = append(c.strays, found{app, m})
			}
		default:
			deploy = append(deploy, m)
		}
	}
	return deploy, adopt
}

// planCleanup says what cleanup will do (or, dry, would do).
func (r *run) planCleanup(c *cleanup) {
	verb := func(will, would string) string {
		if r.opts.DryRun {
			return would
		}
		return will
	}
	for _, f := range c.retiring {
		msg := verb("will retire it again (a restarted process forgets it)", "would retire it again")
		if !running(f.m) {
			msg = verb("retired (stopped): will destroy it", "retired (stopped): would destroy it")
		}
		r.emit(Event{Phase: PhasePlan, App: f.app.Name, Machine: f.m.ID, Region: f.m.Region, Status: StatusRetiring,
			Image: imageOf(f.m), RetireBy: retireBy(f.m), Message: "retiring (replaced by " + orNone(meta(f.m, MetaReplacedBy)) + "): " + msg})
	}
	for _, f := range c.adopted {
		r.emit(Event{Phase: PhasePlan, App: f.app.Name, Machine: f.m.ID, Region: f.m.Region, Status: StatusWaiting,
			Image: imageOf(f.m), Message: "replacement of " + meta(f.m, MetaReplaces) + ", which has retired: an ordinary machine now"})
	}
	for _, f := range c.strays {
		msg := verb("will destroy it", "would destroy it")
		if running(f.m) {
			msg = verb("will retire it (it may hold games)", "would retire it")
		}
		r.emit(Event{Phase: PhasePlan, App: f.app.Name, Machine: f.m.ID, Region: f.m.Region, Status: StatusWaiting,
			Image: imageOf(f.m), Message: "replacement of " + meta(f.m, MetaReplaces) + " left by an interrupted rollout, not usable: " + msg})
	}
}

// doCleanup puts in order what earlier runs left: retired machines that
// stopped are destroyed; retiring ones that run are retired again (their
// process may have restarted and forgotten it; their latest stop stays
// what their metadata says, and one past it is stopped); adopted
// replacements lose their replacement marks; stray replacements are
// retired when they run (they may hold games) or destroyed.
func (r *run) doCleanup(ctx context.Context, c *cleanup) error {
	ctx, cancel := r.withPhase(ctx)
	defer cancel()
	for _, f := range c.retiring {
		if err := r.cleanRetiring(ctx, f); err != nil {
			return err
		}
	}
	for _, f := range c.adopted {
		if err := r.api.deleteMetadata(ctx, f.app.Name, f.m.ID, MetaRole, MetaReplaces); err != nil {
			return failf(err, "could not clear the replacement marks of machine %s", f.m.ID)
		}
		r.emit(Event{Phase: PhaseCleanup, App: f.app.Name, Machine: f.m.ID, Region: f.m.Region, Status: StatusDone,
			Image: imageOf(f.m), Message: "replacement of " + meta(f.m, MetaReplaces) + " adopted: an ordinary machine now"})
	}
	for _, f := range c.strays {
		if err := r.dispose(ctx, PhaseCleanup, f); err != nil {
			return err
		}
	}
	return nil
}

// dispose ends a replacement left by an interrupted run that will not be
// used: retired when it runs (it may hold games), else destroyed.
func (r *run) dispose(ctx context.Context, phase Phase, f found) error {
	if running(f.m) {
		if p, err := pingMachine(ctx, r.hc, f.app.URL, f.m.ID); err == nil {
			if _, err := r.retireMachine(ctx, f.app, f.m, p.BootID, "", time.Time{}); err != nil {
				return err
			}
			r.emit(Event{Phase: phase, App: f.app.Name, Machine: f.m.ID, Region: f.m.Region, Status: StatusRetiring,
				Image: imageOf(f.m), Boot: p.BootID, Message: "unused replacement of an interrupted rollout retired: it stops once its games (if any) have ended"})
			return nil
		}
	}
	return r.destroyMachine(ctx, phase, f.app, f.m, "unused replacement of an interrupted rollout destroyed")
}

// cleanRetiring handles one machine a rollout retired.
func (r *run) cleanRetiring(ctx context.Context, f found) error {
	if !running(f.m) {
		return r.destroyMachine(ctx, PhaseCleanup, f.app, f.m, "retired: it stopped when its games ended; destroyed")
	}
	by := retireBy(f.m)
	ev := Event{Phase: PhaseCleanup, App: f.app.Name, Machine: f.m.ID, Region: f.m.Region, Status: StatusRetiring,
		Image: imageOf(f.m), RetireBy: by}
	if !by.IsZero() && r.now().After(by.Add(retireGrace)) {
		ev.Message = "its latest stop " + by.UTC().Format(time.RFC3339) + " has passed and it still runs: stopping it"
		r.emit(ev)
		if err := r.api.stop(ctx, f.app.Name, f.m.ID); err != nil {
			return failf(err, "could not stop retiring machine %s", f.m.ID)
		}
		return nil
	}
	p, err := pingMachine(ctx, r.hc, f.app.URL, f.m.ID)
	if err != nil {
		ev.Message = "retiring, not answering /ping now (" + err.Error() + "): the next run retires it again"
		r.emit(ev)
		return nil
	}
	by, err = r.retireMachine(ctx, f.app, f.m, p.BootID, meta(f.m, MetaReplacedBy), by)
	if err != nil {
		return err
	}
	ev.Boot, ev.RetireBy = p.BootID, by
	ev.Message = "retiring again (boot " + p.BootID + "): it stops once its games have ended, " + by.UTC().Format(time.RFC3339) + " at the latest"
	r.emit(ev)
	return nil
}

// retireGrace is how long past its latest stop a retiring machine may
// still run (its relay closes what is left at that time, then drains and
// exits) before a rollout stops it.
const retireGrace = time.Minute

// replace is the overlap step of relay tg, whose live boot is old: under
// tg's lease (held by deploy), create (or adopt) its replacement, prove
// it, then retire tg. A replacement that fails its proof is destroyed.
func (r *run) replace(ctx, sctx context.Context, phase Phase, tg *target, old wire.Ping) error {
	ev := func(st Status, msg string) Event {
		return Event{Phase: phase, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region, Status: st,
			Image: tg.res.FromImage, OldBoot: old.BootID, Boot: old.BootID, Replacement: tg.res.Replacement, Message: msg}
	}
	b := tg.adopt
	if b != nil {
		tg.res.Replacement = b.ID
		r.emit(ev(StatusCreating, "adopting replacement "+b.ID+", left by an interrupted rollout: proving it"))
	} else {
		cfg, err := r.replacementConfig(tg)
		if err != nil {
			return failf(err, "could not build the replacement's config")
		}
		what := "creating its replacement on " + r.image
		if n := len(tg.res.Changes); n > 0 {
			what += fmt.Sprintf(" with %d config change(s)", n)
		}
		r.emit(ev(StatusCreating, what))
		b, err = r.createReplacement(sctx, tg, cfg)
		if err != nil {
			return failf(stepCause(sctx, err), "the Machines API refused the replacement of %s", tg.m.ID)
		}
		tg.res.Replacement = b.ID
		r.emit(ev(StatusCreating, "replacement "+b.ID+" created: proving it"))
	}
	bt := &target{role: tg.role, app: tg.app, m: b, want: tg.want, fresh: true,
		res: &MachineResult{Role: tg.role, App: tg.app.Name, Machine: b.ID, Region: b.Region, Image: r.image, Version: versionOf(b)}}
	bev := func(st Status, boot, msg string) Event {
		return Event{Phase: phase, App: tg.app.Name, Machine: b.ID, Region: b.Region, Status: st, Image: r.image, Boot: boot,
			Message: msg}
	}
	r.emit(bev(StatusVerifying, "", "replacement of "+tg.m.ID+": waiting for version "+versionOf(b)+" to start and prove a boot of "+r.image))
	boot, err := r.verify(sctx, bt, versionOf(b), "", r.image)
	if err != nil {
		r.dropReplacement(ctx, phase, tg, b, err)
		return err
	}
	r.emit(bev(StatusDone, boot, "boot "+boot+" runs "+r.image+": proven; "+tg.m.ID+" retires"))
	tg.res.Image, tg.res.Boot, tg.res.Version = r.image, boot, versionOf(b)
	by, err := r.retireMachine(sctx, tg.app, tg.m, old.BootID, b.ID, time.Time{})
	if err != nil {
		return err
	}
	tg.res.Action, tg.res.RetireBy = ActionReplaced, by
	if err := r.api.deleteMetadata(sctx, tg.app.Name, b.ID, MetaRole, MetaReplaces); err != nil {
		// The next run adopts it by its old machine's retiring mark.
		r.log.Warn("replacement marks not cleared", "machine", b.ID, "err", err)
	}
	e := ev(StatusDone, fmt.Sprintf("replaced by %s (boot %s runs %s); retiring: no new rooms, it stops when its games have ended, %s at the latest",
		b.ID, boot, r.image, by.UTC().Format(time.RFC3339)))
	e.Image, e.Boot, e.RetireBy = r.image, boot, by
	r.emit(e)
	return nil
}

// replacementConfig is tg's config with the toml's managed fields and the
// image (as an update would send), without the old machine's rollout
// marks, with the replacement's own.
func (r *run) replacementConfig(tg *target) (*fly.MachineConfig, error) {
	cfg, err := copyConfig(tg.m.Config)
	if err != nil {
		return nil, err
	}
	cfg.Image = r.image
	if tg.want != nil {
		cfg = flyconfig.Merge(tg.m.Config, tg.want)
	}
	md := maps.Clone(cfg.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	for _, k := range metaKeys {
		delete(md, k)
	}
	md[MetaRole], md[MetaReplaces], md[MetaRollout] = RoleReplacement, tg.m.ID, r.id
	cfg.Metadata = md
	return cfg, nil
}

// createReplacement creates the machine (an answer lost on the way is
// found by its create key, never made twice: machinesAPI.launch).
func (r *run) createReplacement(ctx context.Context, tg *target, cfg *fly.MachineConfig) (*fly.Machine, error) {
	return r.api.launch(ctx, tg.app.Name, tg.m.Region, cfg, 0)
}

// dropReplacement destroys a replacement that failed its proof (with a
// short deadline of its own: an interrupted run still destroys it). The
// old machine was never touched: with --rollback that is its rollback.
func (r *run) dropReplacement(ctx context.Context, phase Phase, tg *target, b *fly.Machine, why error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undrainTimeout+apiRequestTimeout)
	defer cancel()
	if err := r.destroyMachine(dctx, phase, tg.app, b, "replacement failed its proof and was destroyed; "+tg.m.ID+
		" was never retired and serves on"); err != nil {
		r.emit(Event{Phase: phase, App: tg.app.Name, Machine: b.ID, Region: b.Region, Status: StatusFailed,
			Message: fmt.Sprintf("could not destroy the failed replacement (%v): a re-run destroys it", err)})
	}
	tg.res.Replacement = ""
	if r.opts.Rollback {
		tg.rollback, tg.rolledBack = true, true
		tg.res.Action = ActionRolledBack
	}
	r.log.Info("replacement dropped", "machine", b.ID, "reason", why)
}

// destroyMachine destroys m and says so.
func (r *run) destroyMachine(ctx context.Context, phase Phase, app App, m *fly.Machine, msg string) error {
	if err := r.api.destroy(ctx, app.Name, m.ID); err != nil {
		return failf(err, "could not destroy machine %s of %s", m.ID, app.Name)
	}
	r.res.Destroyed = append(r.res.Destroyed, m.ID)
	r.emit(Event{Phase: phase, App: app.Name, Machine: m.ID, Region: m.Region, Status: StatusDestroyed, Image: imageOf(m), Message: msg})
	return nil
}

// retireMachine retires machine m of app, whose live boot is boot:
// metadata first (so that a run killed right after finds it again), then
// the relay itself, through the app's URL with fly-force-instance-id and
// the SECRET. by is its latest stop (zero: now plus retire_after). A relay
// that answers with another boot (it restarted) is asked again for that
// boot. A relay from before retiring (no such route) is drained at the
// balancer instead, and a later run stops it. It answers by.
func (r *run) retireMachine(ctx context.Context, app App, m *fly.Machine, boot, replacedBy string, by time.Time) (time.Time, error) {
	if by.IsZero() {
		by = r.now().Add(r.t.RetireAfter.Duration).Truncate(time.Second)
	}
	md := map[string]string{MetaRole: RoleRetiring, MetaRetireBy: by.UTC().Format(time.RFC3339), MetaRollout: r.id}
	if replacedBy != "" {
		md[MetaReplacedBy] = replacedBy
	}
	if err := r.api.setMetadata(ctx, app.Name, m.ID, md); err != nil {
		return by, failf(stepCause(ctx, err), "could not mark machine %s retiring", m.ID)
	}
	for try := 0; ; try++ {
		var st wire.RetireStatus
		err := wire.Call{Method: http.MethodPost, URL: app.URL + wire.PathRelayRetire, Secret: r.secret,
			Header: func(h http.Header) { h.Set(wire.HeaderFlyForceInstance, m.ID) },
			Body:   wire.RetireRequest{BootID: boot, RetireBy: by}}.DoJSON(ctx, r.hc, &st)
		var we *wire.Error
		switch {
		case err == nil && st.BootID == boot && st.Retiring:
			return st.RetireBy, nil
		case err == nil:
			err = fmt.Errorf("it answered %+v", st)
		case errors.As(err, &we) && errors.Is(we, wire.ErrStaleBoot) && try < 2:
			if p, perr := pingMachine(ctx, r.hc, app.URL, m.ID); perr == nil {
				boot = p.BootID
				continue
			}
		case errors.As(err, &we) && we.Status == http.StatusNotFound:
			if _, derr := r.bal.Drain(ctx, r.secret, boot); derr != nil && !errors.Is(derr, wire.ErrNotFound) {
				return by, failf(derr, "relay %s cannot retire (an image from before retiring) and could not be drained", m.ID)
			}
			r.log.Warn("relay cannot retire (an image from before retiring): drained at the balancer; a later run stops it", "machine", m.ID)
			return by, nil
		case errors.Is(err, wire.ErrUnauthorized):
			return by, failf(stepCause(ctx, err), "could not retire machine %s (boot %s): it refuses every value of SECRET this run sends; "+
				"a machine retiring from two SECRET rotation steps ago still runs: finish each step with --wait-retired before the next", m.ID, boot)
		}
		return by, failf(stepCause(ctx, err), "could not retire machine %s (boot %s)", m.ID, boot)
	}
}

// imageOf is m's configured image.
func imageOf(m *fly.Machine) string {
	if m.Config == nil {
		return ""
	}
	return m.Config.Image
}
