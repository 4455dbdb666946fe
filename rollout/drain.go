package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// drain asks the balancer to place no new room on the relay's boot, then
// waits until none of its rooms has a player left (or it has no room, or
// it left the list) or the drain deadline passes. What is still there then
// is what the update interrupts: recorded and reported, not a failure.
func (r *run) drain(ctx context.Context, phase Phase, tg *target, boot string) error {
	ev := func(msg string, rooms, conns int64) {
		r.emit(Event{Phase: phase, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region, Status: StatusDraining,
			Image: tg.res.Image, Boot: boot, Rooms: rooms, Connections: conns, Message: msg})
	}
	if _, err := r.bal.Drain(ctx, r.secret, boot); err != nil {
		if errors.Is(err, wire.ErrNotFound) {
			ev("boot "+boot+" is not registered with the balancer: nothing to drain", 0, 0)
			return nil
		}
		return failf(stepCause(ctx, err), "could not drain relay %s at the balancer", tg.m.ID)
	}
	tg.drained = boot
	ev(fmt.Sprintf("draining boot %s: no new rooms; waiting up to %s for its rooms to empty", boot, r.t.Drain.Duration), 0, 0)
	deadline := r.now().Add(r.t.Drain.Duration)
	for {
		insts, err := r.bal.Instances(ctx, r.secret)
		if err != nil {
			return failf(stepCause(ctx, err), "could not watch relay %s drain", tg.m.ID)
		}
		var in *wire.Instance
		for i := range insts {
			if insts[i].BootID == boot {
				in = &insts[i]
			}
		}
		switch {
		case in == nil:
			ev("boot "+boot+" left the balancer's list: drained", 0, 0)
			return nil
		case in.Rooms == 0 || in.Connections == 0:
			ev(fmt.Sprintf("drained: %d room(s), %d connection(s) left", in.Rooms, in.Connections), in.Rooms, in.Connections)
			return nil
		case !r.now().Before(deadline):
			tg.res.InterruptedRooms, tg.res.InterruptedConnections = in.Rooms, in.Connections
			ev(fmt.Sprintf("drain deadline %s passed: the update interrupts %d live room(s) with %d connection(s)",
				r.t.Drain.Duration, in.Rooms, in.Connections), in.Rooms, in.Connections)
			return nil
		}
		r.progress(tg, WaitDrain, deadline, "waiting for the rooms of boot %s to empty: %d room(s), %d connection(s) left",
			boot, in.Rooms, in.Connections)
		if err := clock.Sleep(ctx, r.clock, min(r.t.Poll.Duration, deadline.Sub(r.now())+time.Millisecond)); err != nil {
			return failf(stepCause(ctx, err), "interrupted while relay %s was draining", tg.m.ID)
		}
	}
}

// undrainTimeout bounds giving a relay back after a failed step; it runs
// even when the rollout was interrupted.
const undrainTimeout = 10 * time.Second

// undrain gives back the relay boot a failed step drained: the balancer
// places new rooms there again. Not when the step lost its lease (another
// run may own the machine now, and may have drained it itself), nor when
// the machine answers with another boot (the update or a rollback replaced
// it: nothing is left drained, and a dead boot must not take rooms). It
// reports what it did; when the balancer cannot be told, the message says
// what to run.
func (r *run) undrain(ctx context.Context, phase Phase, tg *target, stepErr error) {
	boot := tg.drained
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undrainTimeout)
	defer cancel()
	ev := Event{Phase: phase, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region, Status: StatusUndrained, Boot: boot}
	if errors.Is(stepErr, ErrLeaseLost) {
		ev.Status = StatusFailed
		ev.Message = fmt.Sprintf("lease of machine %s lost: boot %s left drained (whoever holds the lease now owns it); "+
			"a re-run of this rollout gives it back, or POST %s with the SECRET", tg.m.ID, boot, r.undrainURL(boot))
		r.emit(ev)
		return
	}
	p, perr := pingMachine(ctx, r.hc, tg.app.URL, tg.m.ID)
	if perr == nil && p.BootID != boot {
		tg.drained = ""
		ev.Message = fmt.Sprintf("boot %s of machine %s was replaced by %s: nothing left drained", boot, tg.m.ID, p.BootID)
		r.emit(ev)
		return
	}
	if perr != nil {
		// Its machine does not answer: the old boot is gone (the machine
		// runs, or tried to run, the new image) or unreachable. Giving it
		// back would let the balancer place rooms on a relay that may be
		// dead until its health probe removes it, so it stays drained.
		ev.Status = StatusFailed
		if tg.fresh {
			// The update went through: the old process was replaced (its
			// machine now crashes, or starts, on the new image).
			tg.drained = ""
			ev.Message = fmt.Sprintf("machine %s was updated: boot %s is gone, and the balancer drops it once its health probe fails; "+
				"nothing to give back", tg.m.ID, boot)
		} else if m, err := r.api.get(ctx, tg.app.Name, tg.m.ID); err == nil && !running(m) {
			tg.drained = ""
			ev.Message = fmt.Sprintf("machine %s is %s: boot %s is gone, and the balancer drops it once its health probe fails; "+
				"nothing to give back", tg.m.ID, m.State, boot)
		} else {
			ev.Message = fmt.Sprintf("machine %s does not answer /ping (%v): boot %s is left drained, so that no room goes to a relay "+
				"that may be down; a re-run of this rollout gives it back, or POST %s with the SECRET", tg.m.ID, perr, boot, r.undrainURL(boot))
		}
		r.emit(ev)
		return
	}
	_, err := r.bal.Undrain(ctx, r.secret, boot)
	switch {
	case err == nil:
		tg.drained = ""
		ev.Message = fmt.Sprintf("undrained boot %s of machine %s: it takes new rooms again", boot, tg.m.ID)
	case errors.Is(err, wire.ErrNotFound):
		tg.drained = ""
		ev.Message = fmt.Sprintf("boot %s of machine %s is gone from the balancer: nothing left drained", boot, tg.m.ID)
	default:
		ev.Status = StatusFailed
		ev.Message = fmt.Sprintf("could not undrain boot %s of machine %s (%v): it takes no new rooms until "+
			"POST %s with the SECRET, a re-run of this rollout, or its next restart", boot, tg.m.ID, err, r.undrainURL(boot))
		r.log.Warn("relay left drained", "machine", tg.m.ID, "boot", boot, "err", err)
	}
	r.emit(ev)
}

// undrainURL is the balancer's route that gives boot back by hand.
func (r *run) undrainURL(boot string) string {
	return strings.TrimRight(r.env.Balancer.URL, "/") + fmt.Sprintf(wire.PathUndrainFmt, boot)
}
