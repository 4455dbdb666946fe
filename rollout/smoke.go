package rollout

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/purrfly/purrfly/client"
)

// smoke runs client.Smoke (the code of `purrctl smoke`) through the
// balancer's public URL once per relay region, pinned to that region.
func (r *run) smoke(ctx context.Context, targets []*target) error {
	ctx, cancel := r.withPhase(ctx)
	defer cancel()
	var regions []string
	for _, tg := range targets {
		if tg.role == RoleRelay && !slices.Contains(regions, tg.m.Region) {
			regions = append(regions, tg.m.Region)
		}
	}
	sort.Strings(regions)
	for _, region := range regions {
		start := r.now()
		r.emit(Event{Phase: PhaseSmoke, Region: region, Status: StatusVerifying, Message: "smoke test in " + region})
		rep, err := client.Smoke(ctx, client.SmokeOptions{
			Balancer: r.env.Balancer.URL, Region: region, StrictRegion: true,
			Timeout: r.t.Smoke.Duration, HTTPClient: r.hc,
		})
		if err != nil {
			return failf(stepCause(ctx, err), "smoke test failed in region %s", region)
		}
		r.res.SmokeRegions = append(r.res.SmokeRegions, region)
		r.emit(Event{Phase: PhaseSmoke, Region: region, Status: StatusDone,
			Message: fmt.Sprintf("smoke passed in %s: room %s on %s in %s", region, rep.Room, rep.RelayURL, r.now().Sub(start).Round(time.Millisecond))})
	}
	return nil
}
