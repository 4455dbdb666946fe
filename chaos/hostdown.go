package chaos

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
)

// hostDown fails the host of the serving balancer machine (flysim's
// host_down: its processes vanish without a signal, its addresses stop
// answering), so that Fly starts the balancer's standby; an allocation on
// PurrNet's schedule (10 tries, 1 s apart) must succeed through the app's
// URL meanwhile. After 5 to 15 s the host returns: the primary boots, the
// standby yields and stops, and an allocation must succeed again. A fleet
// whose balancer has no standby has no host_down (kinds).
func (s *scheduler) hostDown(ctx context.Context) error {
	ms, err := s.f.started(ctx, s.f.balancer)
	if err != nil || len(ms) == 0 {
		return fmt.Errorf("no started balancer machine: %v", err)
	}
	var res flysim.HostFaultResult
	if err := s.f.api(ctx, http.MethodPost, "/flysim/v1/faults", flysim.NetFault{Kind: flysim.NetHostDown, Machine: ms[0].ID}, &res); err != nil {
		return err
	}
	d := s.heldFor(5*time.Second, 15*time.Second)
	s.log(fmt.Sprintf("  host %s down (machines %v) for %v", res.Host, res.Machines, d))
	down := time.Now()
	s.allocateOnPurrNetSchedule(ctx, "host_down")
	s.led.observe("host_down_recovery", time.Since(down))
	pause(ctx, d-time.Since(down))
	if err := s.f.api(ctx, http.MethodPost, "/flysim/v1/faults", flysim.NetFault{Kind: flysim.NetHostUp, Host: res.Host}, &res); err != nil {
		return err
	}
	up := time.Now()
	// Settled: exactly one balancer machine runs, the one that lost its host.
	deadline := time.Now().Add(60 * time.Second)
	for ctx.Err() == nil {
		ms, err := s.f.started(ctx, s.f.balancer)
		if err == nil && len(ms) == 1 && slices.Contains(res.Machines, ms[0].ID) {
			break
		}
		if time.Now().After(deadline) {
			s.led.violate(InvBalancerSettled, "", "60 s after host %s returned, the balancer machines started are %v", res.Host, ms)
			break
		}
		pause(ctx, 500*time.Millisecond)
	}
	s.allocateOnPurrNetSchedule(ctx, "host_up")
	s.led.observe("host_up_recovery", time.Since(up))
	return nil
}

// allocateOnPurrNetSchedule allocates a fresh room as PurrNet does (10
// tries, 1 s apart, one allocation id); failing is a violation. The room
// is never hosted: the relay releases it after its host window.
func (s *scheduler) allocateOnPurrNetSchedule(ctx context.Context, when string) {
	name := fmt.Sprintf("chaos-probe-%s-%d", when, time.Now().UnixNano())
	if _, _, err := s.w.api.AllocateRetry(ctx, "", name, client.Retry{}); err != nil && ctx.Err() == nil {
		s.led.violate(InvAllocSchedule, name, "%s: %v", when, err)
	}
}
