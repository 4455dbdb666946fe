package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// retiringTable lists, once the fleet is proven, the relay machines still
// retiring, app by app, with their rooms and players (as the balancer
// counts them) and their latest stop, as events and in Result.Retiring.
// A retiring machine found stopped is retired: it is destroyed now.
func (r *run) retiringTable(ctx context.Context) error {
	ctx, cancel := r.withPhase(ctx)
	defer cancel()
	insts, _ := r.bal.Instances(ctx, r.secret) // counts only: none is no failure
	total := 0
	for _, app := range r.env.Relays {
		ms, err := r.api.list(ctx, app.Name)
		if err != nil {
			return failf(err, "could not list the machines of %s", app.Name)
		}
		for _, m := range live(ms) {
			if !retiring(m) {
				continue
			}
			rm := RetiringMachine{App: app.Name, Machine: m.ID, Region: m.Region, State: m.State, Image: imageOf(m), RetireBy: retireBy(m)}
			countInstances(&rm, insts)
			if !running(m) {
				if err := r.destroyMachine(ctx, PhaseRetiring, app, m, "retired: stopped when its games ended; destroyed"); err != nil {
					return err
				}
				rm.Retired, rm.State = true, "destroyed"
				r.res.Retiring = append(r.res.Retiring, rm)
				continue
			}
			total++
			r.res.Retiring = append(r.res.Retiring, rm)
			r.emit(Event{Phase: PhaseRetiring, App: app.Name, Machine: m.ID, Region: m.Region, Status: StatusRetiring,
				Image: rm.Image, Boot: rm.Boot, Rooms: rm.Rooms, Connections: rm.Players, RetireBy: rm.RetireBy,
				Message: fmt.Sprintf("retiring: %d room(s), %d player(s); it stops when they have ended, %s at the latest",
					rm.Rooms, rm.Players, stopText(rm.RetireBy))})
		}
	}
	msg := "no relay machine is retiring"
	if total > 0 {
		msg = fmt.Sprintf("%d relay machine(s) retiring: each stops by itself when its last game has ended", total)
		if !r.opts.WaitRetired {
			msg += " (--wait-retired waits for them; the next rollout destroys the stopped ones)"
		}
	}
	r.emit(Event{Phase: PhaseRetiring, Status: StatusDone, Message: msg})
	return nil
}

// countInstances fills rm's boot, rooms and players from the balancer's
// listing of its machine.
func countInstances(rm *RetiringMachine, insts []wire.Instance) {
	for _, in := range insts {
		if in.MachineID == rm.Machine {
			rm.Boot, rm.Rooms, rm.Players = in.BootID, in.Rooms, in.Connections
		}
	}
}

// stopText is a latest stop for a human.
func stopText(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

// waitRetired waits (--wait-retired) until every retiring machine of
// Result.Retiring has stopped, destroying each as it does; every poll is a
// progress event per machine counting down to its latest stop with the
// rooms and players left. A machine still running retireGrace past its
// latest stop (its relay closes what is left at that time and exits) is
// stopped. What its latest stop cut off is reported (ClosedRooms,
// ClosedPlayers, and the replaced machine's Interrupted counts).
func (r *run) waitRetired(ctx context.Context) error {
	var last time.Time
	for i := range r.res.Retiring {
		if by := r.res.Retiring[i].RetireBy; by.After(last) {
			last = by
		}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, max(last.Sub(r.now()), 0)+2*retireGrace+r.t.Phase.Duration,
		fmt.Errorf("the retiring machines did not stop by their latest stop"))
	defer cancel()
	stopped := map[string]bool{}
	for {
		insts, _ := r.bal.Instances(ctx, r.secret)
		left := 0
		for i := range r.res.Retiring {
			rm := &r.res.Retiring[i]
			if rm.Retired {
				continue
			}
			if err := r.watchRetiring(ctx, rm, insts, stopped); err != nil {
				return err
			}
			if !rm.Retired {
				left++
			}
		}
		if left == 0 {
			r.emit(Event{Phase: PhaseRetiring, Status: StatusDone, Message: "every retiring machine has stopped and was destroyed"})
			return nil
		}
		if err := clock.Sleep(ctx, r.clock, r.t.Poll.Duration); err != nil {
			return failf(stepCause(ctx, err), "%d machine(s) still retiring", left)
		}
	}
}

// watchRetiring looks at one retiring machine once.
func (r *run) watchRetiring(ctx context.Context, rm *RetiringMachine, insts []wire.Instance, stopped map[string]bool) error {
	app, ok := r.app(rm.App)
	if !ok {
		return nil
	}
	m, err := r.api.get(ctx, rm.App, rm.Machine)
	if err != nil {
		return nil // looked at again next time
	}
	now := r.now()
	overdue := !rm.RetireBy.IsZero() && !now.Before(rm.RetireBy)
	if !running(m) {
		rm.State = m.State
		if m.State != "destroyed" {
			if err := r.destroyMachine(ctx, PhaseRetiring, app, m, r.retiredText(rm, overdue)); err != nil {
				return err
			}
		}
		rm.Retired, rm.State = true, "destroyed"
		if overdue && rm.Rooms+rm.Players > 0 {
			rm.ClosedRooms, rm.ClosedPlayers = rm.Rooms, rm.Players
			r.noteInterrupted(rm)
		}
		return nil
	}
	if !overdue {
		// What is left before the latest stop is what it would cut off.
		rm.Rooms, rm.Players = 0, 0
		countInstances(rm, insts)
	}
	if overdue && now.After(rm.RetireBy.Add(retireGrace)) && !stopped[rm.Machine] {
		stopped[rm.Machine] = true
		r.emit(Event{Phase: PhaseRetiring, App: rm.App, Machine: rm.Machine, Region: rm.Region, Status: StatusRetiring,
			Message: "still running " + retireGrace.String() + " past its latest stop: stopping it"})
		if err := r.api.stop(ctx, rm.App, rm.Machine); err != nil {
			return failf(err, "could not stop retiring machine %s", rm.Machine)
		}
	}
	r.emit(Event{Phase: PhaseRetiring, App: rm.App, Machine: rm.Machine, Region: rm.Region, Status: StatusRetiring,
		Image: rm.Image, Boot: rm.Boot, Rooms: rm.Rooms, Connections: rm.Players, RetireBy: rm.RetireBy,
		Wait: WaitRetired, Until: rm.RetireBy,
		Message: fmt.Sprintf("retiring: %d room(s), %d player(s) left", rm.Rooms, rm.Players)})
	return nil
}

// retiredText says how a retiring machine ended.
func (r *run) retiredText(rm *RetiringMachine, overdue bool) string {
	if overdue && rm.Rooms+rm.Players > 0 {
		return fmt.Sprintf("retired at its latest stop: %d room(s), %d player(s) were still there and were closed (1012); destroyed",
			rm.Rooms, rm.Players)
	}
	return "retired: its last game ended and it stopped by itself; destroyed"
}

// noteInterrupted copies what a latest stop cut off to the replaced
// machine's result.
func (r *run) noteInterrupted(rm *RetiringMachine) {
	for i := range r.res.Machines {
		if mr := &r.res.Machines[i]; mr.Machine == rm.Machine {
			mr.InterruptedRooms, mr.InterruptedConnections = rm.ClosedRooms, rm.ClosedPlayers
		}
	}
}

// app is the relay app named name.
func (r *run) app(name string) (App, bool) {
	for _, a := range r.env.Relays {
		if a.Name == name {
			return a, true
		}
	}
	return App{}, false
}
