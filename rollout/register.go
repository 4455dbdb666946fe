package rollout

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// registration waits (Wait, within Phase) until the balancer lists exactly
// the proven relay boots, each live: no old boot left, none missing. A
// retiring relay (replaced by overlap, its games still playing) may still
// be listed, marked retiring: it takes no room.
func (r *run) registration(ctx context.Context, targets []*target) error {
	ctx, cancel := context.WithTimeoutCause(ctx, min(r.t.Wait.Duration, r.t.Phase.Duration), fmt.Errorf("wait timeout %s passed", r.t.Wait.Duration))
	defer cancel()
	var want []string
	for _, tg := range targets {
		if tg.role == RoleRelay {
			want = append(want, tg.res.Boot)
		}
	}
	sort.Strings(want)
	if err := r.lateStrays(ctx, targets); err != nil {
		return err
	}
	r.emit(Event{Phase: PhaseRegister, Status: StatusVerifying,
		Message: "waiting for the balancer to list exactly the relay boots " + strings.Join(want, ", ")})
	last := "no answer yet"
	for {
		insts, err := r.bal.Instances(ctx, r.secret)
		if err == nil {
			got, bad, retiring := registeredBoots(insts)
			if slices.Equal(got, want) && bad == "" {
				r.res.Registered = got
				msg := "the balancer lists exactly the new relay boots " + strings.Join(got, ", ")
				if retiring > 0 {
					msg += fmt.Sprintf(" (and %d retiring)", retiring)
				}
				r.emit(Event{Phase: PhaseRegister, Status: StatusDone, Message: msg})
				return nil
			}
			last = fmt.Sprintf("it lists %s%s", orNone(strings.Join(got, ", ")), bad)
		} else {
			last = err.Error()
		}
		r.emit(Event{Phase: PhaseRegister, Status: StatusVerifying, Wait: WaitRegister, Until: deadline(ctx),
			Message: fmt.Sprintf("waiting for the balancer to list exactly the relay boots %s (%s)", strings.Join(want, ", "), last)})
		if err := clock.Sleep(ctx, r.clock, r.t.Poll.Duration); err != nil {
			return failf(stepCause(ctx, err), "the balancer never listed exactly the relay boots %s (%s)", strings.Join(want, ", "), last)
		}
	}
}

// registeredBoots sorts the listed boots that are not retiring, names any
// of them not live, and counts the retiring ones.
func registeredBoots(insts []wire.Instance) ([]string, string, int) {
	var got []string
	bad := ""
	retiring := 0
	for _, in := range insts {
		if in.Status == wire.InstanceRetiring {
			retiring++
			continue
		}
		got = append(got, in.BootID)
		if in.Status != wire.InstanceLive {
			bad += fmt.Sprintf("; %s is %s", in.BootID, in.Status)
		}
	}
	sort.Strings(got)
	return got, bad, retiring
}

// lateStrays looks through the relay apps once more, now that Fly's
// machine lists have caught up, for replacements an interrupted run
// created that the plan's lists did not show yet (a re-run started at
// once): their boots would register beside the proven ones. Each is
// retired (it may hold games) or destroyed, as the cleanup does.
func (r *run) lateStrays(ctx context.Context, targets []*target) error {
	known := map[string]bool{}
	for _, tg := range targets {
		known[tg.m.ID], known[tg.res.Replacement] = true, true
	}
	for _, f := range append(append(slices.Clone(r.clean.retiring), r.clean.adopted...), r.clean.strays...) {
		known[f.m.ID] = true
	}
	for _, id := range r.res.Destroyed {
		known[id] = true
	}
	for _, app := range r.env.Relays {
		ms, err := r.api.list(ctx, app.Name)
		if err != nil {
			return failf(err, "could not list the machines of %s", app.Name)
		}
		for _, m := range live(ms) {
			if known[m.ID] || r.api.madeHere(m.ID) || meta(m, MetaRole) != RoleReplacement {
				continue
			}
			r.emit(Event{Phase: PhaseRegister, App: app.Name, Machine: m.ID, Region: m.Region, Status: StatusWaiting, Image: imageOf(m),
				Message: "replacement of " + meta(m, MetaReplaces) + " left by an interrupted rollout, which the plan's list did not show yet: not used"})
			if err := r.dispose(ctx, PhaseRegister, found{app, m}); err != nil {
				return err
			}
		}
	}
	return nil
}
