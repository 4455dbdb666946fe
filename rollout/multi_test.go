package rollout_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/rollout"
)

// TestRolloutMultiMachineApp rolls the whole fly/sim.toml, including the
// three-machine relay app: each of its machines is updated on its own and
// proven by its own new boot, the balancer then lists exactly the new relay
// boots (every machine registers separately), and smoke passes.
func TestRolloutMultiMachineApp(t *testing.T) {
	t.Parallel() // each test runs its own sim on its own loopback addresses
	f := startFullFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o := f.opts("purrfly:v2")
	o.Observer = rollout.PlainPrinter(testWriter{t})
	res, err := rollout.Run(ctx, o)
	if err != nil {
		t.Fatalf("rollout failed: %v", err)
	}
	var multi, relayBoots []string
	for _, mr := range res.Machines {
		if mr.Action != rollout.ActionUpdated || mr.Boot == "" || mr.Boot == mr.OldBoot {
			t.Errorf("%s %s: action %s, boot %s -> %s", mr.App, mr.Machine, mr.Action, mr.OldBoot, mr.Boot)
		}
		if mr.App == multiApp {
			multi = append(multi, mr.Machine)
		}
		if mr.Role == rollout.RoleRelay {
			relayBoots = append(relayBoots, mr.Boot)
			if p := ping(t, f, mr.App, mr.Machine); p.BootID != mr.Boot || p.ImageRef != "registry.fly.io/purrfly:v2" {
				t.Errorf("%s %s: /ping %+v, want boot %s on v2", mr.App, mr.Machine, p, mr.Boot)
			}
		}
	}
	if len(multi) != 3 {
		t.Fatalf("%s: %d machines rolled, want 3", multiApp, len(multi))
	}
	insts, err := client.NewBalancer(f.env.Balancer.URL).Instances(ctx, simSecret)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, in := range insts {
		listed = append(listed, in.BootID)
	}
	slices.Sort(listed)
	slices.Sort(relayBoots)
	if !slices.Equal(listed, relayBoots) {
		t.Errorf("balancer lists %v, want exactly the new relay boots %v", listed, relayBoots)
	}
	if !slices.Contains(res.SmokeRegions, "ams") || !slices.Contains(res.SmokeRegions, "sea") {
		t.Errorf("smoke regions %v, want ams and sea", res.SmokeRegions)
	}
}
