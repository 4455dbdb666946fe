package rollout

import (
	"context"
	"errors"
	"fmt"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/flyconfig"
)

// errPhaseDeadline is the cause of a step that ran past Timeouts.Phase.
var errPhaseDeadline = errors.New("step ran past its phase deadline")

// withPhase bounds ctx by Timeouts.Phase, ending it with errPhaseDeadline.
func (r *run) withPhase(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, r.t.Phase.Duration, fmt.Errorf("%w (%s)", errPhaseDeadline, r.t.Phase.Duration))
}

// deploy is one machine's step, under its lease: prove the live boot,
// verify-only when it already runs the image, else drain (relays), update
// with the full config, wait for started at the new version, prove the new
// boot and image at /ping, keep it healthy for MinHealthy, and (relays) see
// it registered with the balancer. With --rollback, a failure after the
// update restores the previous config under the same lease.
func (r *run) deploy(ctx context.Context, phase Phase, tg *target, all []*target) (err error) {
	sctx, cancelStep := r.withPhase(ctx)
	defer cancelStep()
	sctx, cancel := context.WithCancelCause(sctx)
	defer cancel(nil)
	ev := func(st Status, msg string) Event {
		return Event{Phase: phase, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region, Status: st,
			Image: tg.res.Image, OldBoot: tg.res.OldBoot, Boot: tg.res.Boot, Message: msg}
	}
	r.emit(ev(StatusLeasing, "acquiring the machine lease"))
	l, err := r.api.acquireLease(sctx, tg.app.Name, tg.m.ID, r.t.LeaseTTL.Duration, r.t.LeaseWait.Duration, cancel,
		r.leaseSay(ev(StatusLeasing, "")))
	if err != nil {
		return failf(err, "could not lease machine %s", tg.m.ID)
	}
	defer func() {
		if rerr := l.release(); rerr != nil {
			r.log.Warn("lease not released", "machine", tg.m.ID, "err", rerr)
			if err == nil {
				err = failf(rerr, "could not release the lease of machine %s", tg.m.ID)
			}
		}
	}()
	m, err := r.api.get(sctx, tg.app.Name, tg.m.ID)
	if err != nil {
		return failf(stepCause(sctx, err), "could not read machine %s", tg.m.ID)
	}
	tg.m = m
	old, perr := pingMachine(sctx, r.hc, tg.app.URL, m.ID)
	tg.res.OldBoot, tg.res.Boot = old.BootID, old.BootID

	if onImage(m, r.image) && (tg.want == nil || len(flyconfig.Diff(m.Config, tg.want)) == 0) {
		// Converge: the machine already runs the image and the config. Prove its live boot
		// (any boot, the image at /ping, healthy, registered) instead of
		// redeploying it; if that fails the step fails, nothing is redeployed.
		r.emit(ev(StatusVerifying, "already on the image: verifying its live boot, not redeploying"))
		tg.since = r.now()
		boot, err := r.verify(sctx, tg, versionOf(m), "", r.image)
		if err != nil {
			if r.opts.Rollback && ctx.Err() == nil {
				r.nothingToRollBack(tg)
			}
			return err
		}
		tg.res.Action, tg.res.Version, tg.res.Boot = ActionVerified, versionOf(m), boot
		r.emit(ev(StatusDone, "verified: boot "+boot+" runs "+r.image))
		return r.unadopt(sctx, tg)
	}
	if tg.role == RoleRelay && r.strategy == StrategyOverlap && perr == nil && running(m) {
		defer catchPanic(&err) // a panic, too, releases the lease
		return r.replace(ctx, sctx, phase, tg, old)
	}
	if err := r.unadopt(sctx, tg); err != nil {
		return err
	}
	if tg.role == RoleRelay {
		if err := r.othersUp(sctx, tg, all); err != nil {
			return err
		}
		// Nothing is left drained: a step that fails after its drain
		// (update refused, interrupted, new boot unhealthy) gives the old
		// boot back before the lease is released, if it still lives.
		defer func() {
			if err != nil && tg.drained != "" {
				r.undrain(ctx, phase, tg, err)
			}
		}()
		defer catchPanic(&err) // a panic, too, undrains (above) and releases the lease
		if perr == nil {
			if err := r.drain(sctx, phase, tg, old.BootID); err != nil {
				return err
			}
		}
	}
	prev, err := copyConfig(m.Config)
	if err != nil {
		return failf(err, "could not read the config of machine %s", m.ID)
	}
	cfg, _ := copyConfig(m.Config)
	cfg.Image = r.image
	what := fmt.Sprintf("updating %s -> %s", prev.Image, r.image)
	if tg.want != nil {
		// The toml decides the managed fields; whatever else the machine
		// has (mounts, platform metadata) is kept.
		cfg = flyconfig.Merge(m.Config, tg.want)
		n := len(tg.res.Changes)
		switch {
		case n > 0 && prev.Image == r.image:
			what = fmt.Sprintf("updating its config (image %s unchanged): %d change(s)", r.image, n)
		case n > 0:
			what += fmt.Sprintf(" with %d config change(s)", n)
		}
	}
	r.emit(ev(StatusUpdating, what))
	out, err := r.api.update(sctx, tg.app.Name, m, cfg, l.Nonce())
	if err != nil {
		return failf(stepCause(sctx, err), "the Machines API refused the update of %s", m.ID)
	}
	tg.res.Image, tg.res.Version = r.image, versionOf(out)
	tg.fresh = true
	r.emit(ev(StatusVerifying, "waiting for version "+versionOf(out)+" to start and prove a new boot"))
	boot, err := r.verify(sctx, tg, versionOf(out), old.BootID, r.image)
	if err == nil {
		tg.res.Action, tg.res.Boot, tg.res.State = ActionUpdated, boot, "started"
		r.emit(ev(StatusDone, fmt.Sprintf("boot %s runs %s (was %s)", boot, r.image, orNone(old.BootID))))
		return nil
	}
	if r.opts.Rollback && ctx.Err() == nil {
		if prev.Image == r.image && len(tg.res.Changes) == 0 {
			// The machine had this very config before the step (a
			// re-run after a failed rollout without --rollback): going
			// "back" would deploy the failing image again.
			r.nothingToRollBack(tg)
			return err
		}
		tg.rollback = true
		tg.rollbackErr = r.rollback(ctx, phase, tg, l, prev)
		tg.rolledBack = tg.rollbackErr == nil
	}
	return err
}

// nothingToRollBack says that a failed machine was already on the image
// (and its config) before this run: there is no earlier one to go back to.
func (r *run) nothingToRollBack(tg *target) {
	r.emit(Event{Phase: PhaseRollback, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region, Status: StatusFailed,
		Image: r.image, Message: fmt.Sprintf("nothing to roll back to: machine %s was already on %s before this run; "+
			"roll out the last image that worked (purrctl rollout %s --image REF)", tg.m.ID, r.image, r.env.Name)})
}

// unadopt ends the replacement the plan meant tg to adopt when tg is not
// replaced after all (it turned out to run the image, or to be down and
// is updated in place): it may hold games, so it retires (or, not
// running, is destroyed).
func (r *run) unadopt(ctx context.Context, tg *target) error {
	if tg.adopt == nil {
		return nil
	}
	b := tg.adopt
	tg.adopt = nil
	return r.dispose(ctx, PhaseRelays, found{tg.app, b})
}

// rollback puts the machine back on its previous config (under the same
// lease, with a fresh phase deadline) and verifies it like an update.
func (r *run) rollback(ctx context.Context, phase Phase, tg *target, l *lease, prev *fly.MachineConfig) error {
	ctx, cancel := r.withPhase(ctx)
	defer cancel()
	failedBoot := tg.res.Boot
	r.emit(Event{Phase: PhaseRollback, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region, Status: StatusRollingBack,
		Image: prev.Image, Message: "rolling back to " + prev.Image})
	m, err := r.api.get(ctx, tg.app.Name, tg.m.ID)
	if err != nil {
		return err
	}
	out, err := r.api.update(ctx, tg.app.Name, m, prev, l.Nonce())
	if err != nil {
		return err
	}
	boot, err := r.verify(ctx, tg, versionOf(out), failedBoot, prev.Image)
	if err != nil {
		return err
	}
	tg.res.Action, tg.res.Image, tg.res.Boot, tg.res.Version, tg.res.State = ActionRolledBack, prev.Image, boot, versionOf(out), "started"
	r.emit(Event{Phase: PhaseRollback, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region, Status: StatusRolledBack,
		Image: prev.Image, Boot: boot, Message: fmt.Sprintf("rolled back: boot %s runs %s", boot, prev.Image)})
	return nil
}

// othersUp refuses to take a relay down while another relay of the
// environment does not answer /ping: that would make two down at once.
func (r *run) othersUp(ctx context.Context, tg *target, all []*target) error {
	for _, o := range all {
		if o.role != RoleRelay || o == tg {
			continue
		}
		if _, err := pingMachine(ctx, r.hc, o.app.URL, o.m.ID); err != nil {
			return failf(err, "relay %s of %s is not answering, so updating %s would take a second relay down", o.m.ID, o.app.Name, tg.m.ID)
		}
	}
	return nil
}

// stepCause prefers the step context's cause (lease lost, phase deadline)
// over the error it produced.
func stepCause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(err, c) {
		return fmt.Errorf("%w: %w", c, err)
	}
	return err
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
