package rollout

import (
	"context"
	"fmt"
	"time"
)

// progress emits a progress event for tg's machine: what it waits for
// (wait, and the message in full) and until when. The event keeps the
// phase, status, image and boots of the machine's last event.
func (r *run) progress(tg *target, wait string, until time.Time, format string, args ...any) {
	ev, ok := r.last[tg.m.ID]
	if !ok {
		// No state event yet: a line still says where it stands.
		phase := PhaseRelays
		if tg.role == RoleBalancer {
			phase = PhaseBalancer
		}
		ev = Event{Phase: phase, Status: StatusVerifying, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region}
	}
	ev.Time, ev.Rooms, ev.Connections = time.Time{}, 0, 0
	ev.Wait, ev.Until, ev.Message = wait, until, fmt.Sprintf(format, args...)
	r.emit(ev)
}

// provedBoot makes a machine's later progress events name the boot being
// verified (Boot) beside the one it replaces (OldBoot), as their messages
// do.
func (r *run) provedBoot(tg *target, oldBoot, boot string) {
	if ev, ok := r.last[tg.m.ID]; ok {
		ev.OldBoot, ev.Boot = oldBoot, boot
		r.last[tg.m.ID] = ev
	}
}

// remember keeps a machine's last state event, which its progress
// events repeat.
func (r *run) remember(ev Event) {
	if ev.Machine != "" && ev.Wait == "" {
		if r.last == nil {
			r.last = map[string]Event{}
		}
		r.last[ev.Machine] = ev
	}
}

// leaseSay is what acquireLease says, as events like base: a state event
// when wait is "", else a progress event.
func (r *run) leaseSay(base Event) func(wait, msg string, until time.Time) {
	return func(wait, msg string, until time.Time) {
		ev := base
		ev.Message, ev.Wait, ev.Until = msg, wait, until
		r.emit(ev)
	}
}

// deadline is when ctx gives up (zero when never).
func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
