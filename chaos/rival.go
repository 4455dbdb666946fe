package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
)

// FaultRival (opt-in: Options.Rival) is a partition with a rival: while a
// relay is cut from the balancer and removed by it, a second host
// allocates the name of a room that relay still hosts (PurrNet reuses a
// scene's room name on every Play) and plays it elsewhere. Two machines
// then host one name, which no one can prevent while the partition lasts
// (the balancer cannot tell a cut relay from a dead one); what must hold
// is that it ends once the partition heals: within recoverBound of the
// heal, at most one machine hosts the name (InvSplitBrain otherwise).
const FaultRival = "partition_rival"

// rival runs one FaultRival; it reports an error only when it could not set
// the scene up (no room on a cut relay), which is not a violation.
func (s *scheduler) rival(ctx context.Context) error {
	app, l, victim := s.rivalVictim(ctx)
	if victim == nil {
		return fmt.Errorf("no live room hosted on a relay with fault links")
	}
	victim.pinned.Store(true) // its host stays until the check is done
	defer victim.pinned.Store(false)
	d := 2*s.w.joinBound() + 5*time.Second
	s.log(fmt.Sprintf("  partition %s for %v; a rival host takes room %s elsewhere", app, d, victim.name))
	s.w.v.expectSplit(victim.name, true)
	defer s.w.v.expectSplit(victim.name, false)
	healAt := time.Now().Add(d)
	for _, name := range l {
		if name != "" {
			if err := s.f.netFault(ctx, flysim.NetFault{Kind: flysim.NetLinkPartition, Link: name, DurationMS: int(d.Milliseconds())}); err != nil {
				return err
			}
		}
	}
	// The rival's allocation succeeds once the balancer removed the relay.
	var rivalHost *client.Host
	for rivalHost == nil && time.Now().Before(healAt.Add(-2*time.Second)) && ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := s.w.api.Allocate(actx, s.f.regions[app], victim.name, client.NewAllocationID())
		if err == nil {
			// A failed dial is retried with the next allocation.
			rivalHost, _ = client.DialHost(actx, c, victim.name, &client.DialOptions{HTTPClient: s.w.hc})
		}
		cancel()
		if rivalHost == nil {
			pause(ctx, 500*time.Millisecond)
		}
	}
	if rivalHost == nil {
		pause(ctx, time.Until(healAt))
		return fmt.Errorf("the rival could not take %s during the partition", victim.name)
	}
	defer rivalHost.CloseNow()
	s.led.add("rival_rooms", 1)
	pause(ctx, time.Until(healAt))
	// After the heal: within recoverBound, one machine hosts the name.
	deadline := time.Now().Add(s.recoverBound())
	for ctx.Err() == nil {
		n := s.w.v.hostedCount(victim.name, time.Now().Add(-viewEvery/2))
		if n >= 0 && n <= 1 {
			s.led.observe("rival_split_after_heal", time.Since(healAt))
			return nil
		}
		if time.Now().After(deadline) {
			s.led.violate(InvSplitBrain, victim.name, "still hosted on %d machines %v after the partition healed", n, s.recoverBound())
			return nil
		}
		pause(ctx, 250*time.Millisecond)
	}
	return nil
}

// rivalVictim finds a live room hosted on a single-machine relay with fault
// links, waiting up to 10 s for one.
func (s *scheduler) rivalVictim(ctx context.Context) (string, [2]string, *liveRoom) {
	deadline := time.Now().Add(10 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		for app, l := range s.f.links {
			ms, err := s.f.started(ctx, app)
			if err != nil || len(ms) != 1 {
				continue
			}
			for _, r := range s.w.liveRooms() {
				if s.w.v.hostedMachine(r.name) == ms[0].ID && r.up.Load() {
					return app, l, r
				}
			}
		}
		pause(ctx, time.Second)
	}
	return "", [2]string{}, nil
}
