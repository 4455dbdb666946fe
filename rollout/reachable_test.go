package rollout_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestNewBootTakesNoRoomUntilReachable: a relay's new process registers
// with the balancer at once, but Fly's proxy routes nobody to it until its
// check passes (here a 3 s grace period). Rooms allocated meanwhile must
// not go to it: every host allocated then connects (through the proxy, as
// PurrNet does, never retrying), its room placed on a relay players can
// reach; the new boot is listed as starting until the proxy routes to it.
func TestNewBootTakesNoRoomUntilReachable(t *testing.T) {
	t.Parallel()
	f := startFleet(t, func(c *flysim.Config) {
		for _, a := range c.Apps {
			if a.Name == "purrfly-relay-a" {
				a.ServiceChecks[0].GracePeriod = flysim.Duration{Duration: 3 * time.Second}
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := f.machine(t, "purrfly-relay-a")
	before := ping(t, f, "purrfly-relay-a", m.ID).BootID
	if _, err := f.fc.Update(ctx, "purrfly-relay-a", fly.LaunchMachineInput{ID: m.ID, Region: m.Region, Config: m.Config}, ""); err != nil {
		t.Fatal(err)
	}
	b := &client.Balancer{BaseURL: f.env.Balancer.URL, HTTP: f.hc, Timeout: 5 * time.Second}
	admin := client.NewAdmin(f.env.Balancer.URL, simAdminKey)
	admin.HTTP = f.hc
	// Allocations start once the old process has left the balancer's
	// list. One it answered in the very instant its stop began would go
	// down with it: a race with the stop, not what this test is about.
	testutil.Eventually(t, 20*time.Second, "the old boot to leave the balancer's list", func() bool {
		insts, err := b.Instances(ctx, simSecret)
		if err != nil {
			return false
		}
		for _, in := range insts {
			if in.MachineID == m.ID && in.BootID == before {
				return false
			}
		}
		return true
	})
	sawStarting, placedElsewhere, onNew := false, 0, 0
	deadline := time.Now().Add(20 * time.Second) // wall clock: a real process restarting
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		insts, err := b.Instances(ctx, simSecret)
		if err != nil {
			t.Fatal(err)
		}
		newBoot := ""
		for _, in := range insts {
			if in.MachineID == m.ID && in.BootID != before {
				newBoot = in.BootID
				if in.Status == wire.InstanceStarting {
					sawStarting = true
				}
			}
		}
		name := fmt.Sprintf("during-restart-%d", i)
		var hc wire.Capability
		allocID := client.NewAllocationID()
		if err := (client.Retry{}).Do(ctx, func(ctx context.Context) error {
			var err error
			hc, err = b.Allocate(ctx, "ams", name, allocID)
			return err
		}); err != nil {
			t.Fatalf("allocation %s: %v", name, err)
		}
		h, err := client.DialHost(ctx, hc, name, &client.DialOptions{NoSessionHint: true, HTTPClient: f.hc})
		if err != nil {
			t.Errorf("host of %s (allocated while relay-a restarts) could not connect: %v", name, err)
			continue
		}
		h.CloseNow()
		rm, err := admin.Room(ctx, name)
		switch {
		case err != nil:
			// The host left: the room may be gone already.
		case rm.MachineID != m.ID:
			placedElsewhere++
		case rm.BootID == newBoot:
			onNew++
		}
		if onNew > 0 {
			break
		}
	}
	if !sawStarting || placedElsewhere == 0 || onNew == 0 {
		t.Errorf("the new boot listed starting: %v; rooms placed elsewhere meanwhile: %d; then on the new boot: %d (want yes, some, some)",
			sawStarting, placedElsewhere, onNew)
	}
}
