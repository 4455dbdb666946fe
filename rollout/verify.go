package rollout

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/purrfly/purrfly/internal/clock"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/wire"
)

// getEvery spaces the machine reads that watch for an exited process while
// polling /ping (Fly's rate limit is about one a second per action).
const getEvery = time.Second

// verify proves an update took: the machine reaches started at version,
// then /ping through fly-force-instance-id reports a boot other than
// oldBoot running image, that boot stays healthy for MinHealthy, and a
// relay's boot is registered live with the balancer. All within Wait.
func (r *run) verify(ctx context.Context, tg *target, version, oldBoot, image string) (string, error) {
	wctx, cancel := context.WithTimeoutCause(ctx, r.t.Wait.Duration, fmt.Errorf("wait timeout %s passed", r.t.Wait.Duration))
	defer cancel()
	if err := r.waitStarted(wctx, tg, version); err != nil {
		return "", err
	}
	boot, err := r.waitNewBoot(wctx, tg, version, oldBoot, image)
	if err != nil {
		return "", err
	}
	tg.res.Boot = boot
	r.provedBoot(tg, oldBoot, boot)
	if err := r.healthy(wctx, tg, version, boot); err != nil {
		return boot, err
	}
	return boot, nil
}

// waitStarted long-polls /wait for started at version in short slices,
// reading the machine between slices so a process that exits at once is
// reported at once instead of after the whole wait.
func (r *run) waitStarted(ctx context.Context, tg *target, version string) error {
	slice := min(max(4*r.t.Poll.Duration, time.Second), 10*time.Second)
	for {
		r.progress(tg, WaitStarted, deadline(ctx), "waiting for the machine to reach started at version %s", version)
		err := r.api.waitStarted(ctx, tg.app.Name, tg.m.ID, version, slice)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return failf(stepCause(ctx, err), "machine %s did not reach started at version %s", tg.m.ID, version)
		}
		if statusOf(err) == http.StatusNotFound && r.api.isFresh(tg.m.ID) {
			// Just created: Fly does not show it everywhere yet.
			if err := clock.Sleep(ctx, r.clock, max(r.t.Poll.Duration, 500*time.Millisecond)); err != nil {
				return failf(stepCause(ctx, err), "machine %s did not reach started at version %s", tg.m.ID, version)
			}
			continue
		}
		m, gerr := r.api.get(ctx, tg.app.Name, tg.m.ID)
		if gerr != nil {
			continue
		}
		if err := r.stillOurs(tg, m, version); err != nil {
			return err
		}
	}
}

// stillOurs fails when the machine left the version being verified or its
// process is gone.
func (r *run) stillOurs(tg *target, m *fly.Machine, version string) error {
	if v := versionOf(m); v != version {
		return failf(nil, "machine %s changed under the rollout: version %s, expected %s", m.ID, v, version)
	}
	if why := exitReason(m); why != "" {
		tg.res.State = m.State
		return failf(nil, "machine %s stopped after its update: %s", m.ID, why)
	}
	if why := crashedSince(m, tg.since); why != "" && (tg.fresh || !tg.since.IsZero()) {
		tg.res.State = m.State
		return failf(nil, "machine %s crashed after its update: %s", m.ID, why)
	}
	return nil
}

// waitNewBoot polls /ping until it shows a new boot running image.
func (r *run) waitNewBoot(ctx context.Context, tg *target, version, oldBoot, image string) (string, error) {
	var lastGet time.Time
	last := "no answer yet"
	var m *fly.Machine
	for {
		if m == nil || r.now().Sub(lastGet) >= getEvery {
			lastGet = r.now()
			if got, err := r.api.get(ctx, tg.app.Name, tg.m.ID); err == nil {
				m = got
				if err := r.stillOurs(tg, m, version); err != nil {
					return "", err
				}
			}
		}
		p, err := pingMachine(ctx, r.hc, tg.app.URL, tg.m.ID)
		switch {
		case err != nil:
			last = "no answer at /ping: " + err.Error()
		case p.BootID == oldBoot:
			last = "still the old boot " + oldBoot
		case m == nil || !sameImage(p.ImageRef, m, image):
			last = fmt.Sprintf("boot %s reports image %q, want %s", p.BootID, p.ImageRef, image)
		case p.Draining:
			last = fmt.Sprintf("boot %s says it is draining", p.BootID)
		case p.Retiring:
			last = fmt.Sprintf("boot %s says it is retiring", p.BootID)
		case p.Role != "" && p.Role != tg.role:
			last = fmt.Sprintf("boot %s is a %s, want a %s", p.BootID, p.Role, tg.role)
		default:
			return p.BootID, nil
		}
		r.progress(tg, WaitBoot, deadline(ctx), "waiting for a new boot of %s at /ping (%s)", image, last)
		if err := clock.Sleep(ctx, r.clock, r.t.Poll.Duration); err != nil {
			return "", failf(stepCause(ctx, err), "machine %s never proved a new boot (%s)", tg.m.ID, last)
		}
	}
}

// healthy requires boot to keep answering /ping for MinHealthy without a
// gap, and then the machine's Fly checks to pass; a relay's boot must also
// be registered live with the balancer. A failed ping restarts the window;
// another boot id or a stopped machine fails at once.
func (r *run) healthy(ctx context.Context, tg *target, version, boot string) error {
	start := r.now()
	last := ""
	stayed := false // the healthy time was reached: what is left is readiness
	for {
		p, err := pingMachine(ctx, r.hc, tg.app.URL, tg.m.ID)
		switch {
		case err != nil:
			start, last, stayed = r.now(), "no answer at /ping: "+err.Error(), false
			r.progress(tg, WaitHealthy, start.Add(r.t.MinHealthy.Duration),
				"boot %s must answer /ping for %s in a row (starting over: %s)", boot, r.t.MinHealthy.Duration, last)
		case p.BootID != boot:
			return failf(nil, "machine %s restarted during its healthy time: boot %s replaced %s", tg.m.ID, p.BootID, boot)
		case r.now().Sub(start) >= r.t.MinHealthy.Duration:
			stayed = true
			ok, why, err := r.settled(ctx, tg, version, boot)
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
			if ctx.Err() == nil || last == "" {
				// A check the deadline cut short says nothing about
				// the machine: the failure keeps the last real reason
				// (say, a boot the balancer never listed).
				last = why
			}
			r.progress(tg, WaitReady, deadline(ctx), "boot %s stayed healthy for %s; waiting for it to be ready (%s)",
				boot, r.t.MinHealthy.Duration, last)
		default:
			r.progress(tg, WaitHealthy, start.Add(r.t.MinHealthy.Duration),
				"boot %s must answer /ping for %s in a row", boot, r.t.MinHealthy.Duration)
		}
		if err := clock.Sleep(ctx, r.clock, r.t.Poll.Duration); err != nil {
			if stayed {
				return failf(stepCause(ctx, err), "boot %s of machine %s stayed healthy for %s but was not ready yet (%s)",
					boot, tg.m.ID, r.t.MinHealthy.Duration, last)
			}
			if last == "" {
				last = "healthy time not reached"
			}
			return failf(stepCause(ctx, err), "boot %s of machine %s did not stay healthy for %s (%s)", boot, tg.m.ID, r.t.MinHealthy.Duration, last)
		}
	}
}

// settled checks, once the healthy time passed: machine still at version
// and started, (relay) ready by its own /ready, its checks passing, and
// (relay) its boot registered live at the balancer.
func (r *run) settled(ctx context.Context, tg *target, version, boot string) (bool, string, error) {
	m, err := r.api.get(ctx, tg.app.Name, tg.m.ID)
	if err != nil {
		return false, err.Error(), nil
	}
	if err := r.stillOurs(tg, m, version); err != nil {
		return false, "", err
	}
	if tg.role == RoleRelay {
		// The relay knows best why it is not registered (a wrong SECRET,
		// an unreachable balancer): its /ready says so, and its Fly check
		// (fly/relay.toml) fails for the same reason.
		if why := readyMachine(ctx, r.hc, tg.app.URL, tg.m.ID); why != "" {
			return false, why, nil
		}
	}
	if ok, why := checksPassing(m); !ok {
		return false, why, nil
	}
	if tg.role == RoleRelay && !r.registeredLive(ctx, boot) {
		return false, "boot " + boot + " is not registered live with the balancer", nil
	}
	tg.res.State = m.State // as the Machines API reports it now
	return true, "", nil
}

// registeredLive reports whether the balancer lists boot as a live relay.
func (r *run) registeredLive(ctx context.Context, boot string) bool {
	if boot == "" {
		return false
	}
	insts, err := r.bal.Instances(ctx, r.secret)
	if err != nil {
		return false
	}
	for _, in := range insts {
		if in.BootID == boot {
			return in.Status == wire.InstanceLive
		}
	}
	return false
}
