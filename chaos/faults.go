package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/purrfly/purrfly/flysim"
)

// Fault kinds, the keys of Report.Faults.
const (
	FaultRelayKill    = "relay_kill"    // SIGKILL a relay machine (Machines API signal); its restart policy restarts it
	FaultBalancerKill = "balancer_kill" // SIGKILL the balancer machine; restarted by its policy
	FaultMachineStop  = "machine_stop"  // stop a relay machine (kill_signal, drain), later start it
	FaultLinkDelay    = "link_delay"    // delay one direction between the balancer and a relay
	FaultLinkDrop     = "link_drop"     // cut one direction's connections for a while
	FaultPartition    = "partition"     // partition a relay from the balancer, both directions
	FaultDNSStale     = "dns_stale"     // freeze the multi-machine app's DNS, stop and start one of its machines meanwhile
	FaultHostDown     = "host_down"     // fail the serving balancer's host (its standby takes over), then bring it back
)

// FaultKinds lists every kind, in report order.
var FaultKinds = []string{FaultRelayKill, FaultBalancerKill, FaultMachineStop, FaultLinkDelay, FaultLinkDrop, FaultPartition, FaultDNSStale, FaultHostDown}

// scheduler injects one fault at a time, picked with a seeded RNG: first
// every kind once (shuffled), then at random; each fault heals (by itself
// or by the scheduler), then the recovery audit runs before the next.
type scheduler struct {
	f         *fleet
	w         *workload
	led       *ledger
	rng       *rand.Rand // owned by the scheduler goroutine
	log       func(string)
	withRival bool // FaultRival is one of the kinds (Options.Rival)
}

// heldFor is a random hold time in [lo, hi).
func (s *scheduler) heldFor(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

func (s *scheduler) pick(list []machine) machine { return list[s.rng.IntN(len(list))] }

// kinds available in this fleet.
func (s *scheduler) kinds() []string {
	var out []string
	for _, k := range FaultKinds {
		switch {
		case (k == FaultLinkDelay || k == FaultLinkDrop || k == FaultPartition) && len(s.f.links) == 0:
		case k == FaultDNSStale && s.f.multi == "":
		case k == FaultHostDown && !s.f.balancerStandby:
		default:
			out = append(out, k)
		}
	}
	if s.withRival && len(s.f.links) > 0 {
		out = append(out, FaultRival)
	}
	return out
}

// run injects faults until the storm ends or maxFaults were injected; the
// first round (every kind once) completes even past the storm's end (ctx
// still bounds it), so a slow machine never skips a kind.
func (s *scheduler) run(ctx, storm context.Context, maxFaults int, gap time.Duration) {
	kinds := s.kinds()
	order := append([]string(nil), kinds...)
	s.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for n := 0; n < max(maxFaults, len(order)) && ctx.Err() == nil; n++ {
		if n >= len(order) && storm.Err() != nil {
			return
		}
		kind := kinds[s.rng.IntN(len(kinds))]
		if n < len(order) {
			kind = order[n]
		}
		if err := s.inject(ctx, kind); err != nil {
			if ctx.Err() == nil {
				s.log(fmt.Sprintf("fault %s not injected: %v", kind, err))
				s.led.add("faults_failed", 1)
			}
		} else {
			s.led.fault(kind)
		}
		s.audit(ctx)
		if n+1 >= len(order) {
			pause(storm, s.heldFor(gap/2, gap*3/2))
		} else {
			pause(ctx, s.heldFor(gap/2, gap*3/2))
		}
	}
}

// inject applies one fault and waits until it has healed.
func (s *scheduler) inject(ctx context.Context, kind string) error {
	s.log("fault " + kind)
	switch kind {
	case FaultRelayKill, FaultMachineStop:
		ms, err := s.f.started(ctx, s.f.relays...)
		if err != nil || len(ms) == 0 {
			return fmt.Errorf("no started relay machine: %v", err)
		}
		m := s.pick(ms)
		if kind == FaultRelayKill {
			return s.crash(ctx, m)
		}
		if err := s.f.stop(ctx, m); err != nil {
			return err
		}
		if err := s.f.wait(ctx, m, flysim.StateStopped, 30*time.Second); err != nil {
			return err
		}
		pause(ctx, s.heldFor(time.Second, 5*time.Second))
		return s.startAgain(ctx, m)
	case FaultBalancerKill:
		ms, err := s.f.started(ctx, s.f.balancer)
		if err != nil || len(ms) == 0 {
			return fmt.Errorf("no started balancer machine: %v", err)
		}
		return s.crash(ctx, ms[0])
	case FaultLinkDelay, FaultLinkDrop:
		app, l := s.someLink()
		name := l[s.rng.IntN(2)]
		if name == "" {
			name = l[0] + l[1]
		}
		d := s.heldFor(2*time.Second, 8*time.Second)
		nf := flysim.NetFault{Kind: flysim.NetLinkDrop, Link: name, DurationMS: int(d.Milliseconds())}
		if kind == FaultLinkDelay {
			nf.Kind, nf.DelayMS = flysim.NetLinkDelay, 100+s.rng.IntN(900)
		}
		s.log(fmt.Sprintf("  %s on link %s (%s) for %v", nf.Kind, name, app, d))
		if err := s.f.netFault(ctx, nf); err != nil {
			return err
		}
		pause(ctx, d)
		return nil
	case FaultPartition:
		app, l := s.someLink()
		d := s.heldFor(3*time.Second, 12*time.Second)
		s.log(fmt.Sprintf("  partition %s from the balancer for %v", app, d))
		for _, name := range l {
			if name == "" {
				continue
			}
			if err := s.f.netFault(ctx, flysim.NetFault{Kind: flysim.NetLinkPartition, Link: name, DurationMS: int(d.Milliseconds())}); err != nil {
				return err
			}
		}
		pause(ctx, d)
		return nil
	case FaultRival:
		return s.rival(ctx)
	case FaultHostDown:
		return s.hostDown(ctx)
	case FaultDNSStale:
		d := s.heldFor(5*time.Second, 12*time.Second)
		if err := s.f.netFault(ctx, flysim.NetFault{Kind: flysim.NetDNSStale, App: s.f.multi, DurationMS: int(d.Milliseconds())}); err != nil {
			return err
		}
		ms, err := s.f.started(ctx, s.f.multi)
		if err != nil || len(ms) < 2 {
			pause(ctx, d)
			return nil // stale answers while nothing changes
		}
		m := s.pick(ms)
		s.log(fmt.Sprintf("  DNS of %s stale for %v; machine %s stops and starts meanwhile", s.f.multi, d, m.ID))
		if err := s.f.stop(ctx, m); err != nil {
			return err
		}
		if err := s.f.wait(ctx, m, flysim.StateStopped, 30*time.Second); err != nil {
			return err
		}
		if err := s.startAgain(ctx, m); err != nil {
			return err
		}
		pause(ctx, d/2)
		return nil
	}
	return fmt.Errorf("unknown fault kind %q", kind)
}

// someLink picks a relay app with fault links.
func (s *scheduler) someLink() (string, [2]string) {
	apps := make([]string, 0, len(s.f.links))
	for _, a := range s.f.relays {
		if _, ok := s.f.links[a]; ok {
			apps = append(apps, a)
		}
	}
	a := apps[s.rng.IntN(len(apps))]
	return a, s.f.links[a]
}

// crash SIGKILLs m and waits for its restart policy to bring it back
// (started again), or starts it when the policy does not.
func (s *scheduler) crash(ctx context.Context, m machine) error {
	if err := s.f.kill(ctx, m); err != nil {
		return err
	}
	s.log(fmt.Sprintf("  SIGKILL %s %s", m.app, m.ID))
	// The policy's first restart waits 100 ms; give it 10 s before
	// starting the machine by hand (a config without a policy).
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for wctx.Err() == nil {
		pause(wctx, 200*time.Millisecond)
		ms, err := s.f.machines(ctx, m.app)
		if err != nil {
			continue
		}
		for _, x := range ms {
			if x.ID == m.ID && x.State == flysim.StateStopped {
				return s.startAgain(ctx, m)
			}
		}
		if err := s.f.wait(wctx, m, flysim.StateStarted, time.Second); err == nil {
			s.led.add("restarts_by_policy", 1)
			return nil
		}
	}
	return s.startAgain(ctx, m)
}

// startAgain starts a stopped machine and waits until it is started.
func (s *scheduler) startAgain(ctx context.Context, m machine) error {
	if err := s.f.start(ctx, m); err != nil {
		return err
	}
	return s.f.wait(ctx, m, flysim.StateStarted, 30*time.Second)
}

// recoverBound is how long after a fault heals a room whose host is still
// connected may stay unjoinable or unserved: a restarted process's start
// and checks (10 s), the balancer noticing a relay (HealthFailures
// probes), and two heartbeats to register and republish.
func (s *scheduler) recoverBound() time.Duration {
	b := s.f.health
	return 10*time.Second + time.Duration(b.HealthFailures)*(b.HealthInterval+b.HealthTimeout) + 2*b.Heartbeat
}
