package e2e

import (
	"testing"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

const drainAdminKey = "e2e-admin-key-0123456789abcdef"

// TestDrainOutlivesBalancerRestart: an operator drains a relay, the
// balancer restarts with empty state, and the relay, repeating the drain
// its balancer told it of, comes back drained: new rooms of its region go
// to the other relay. An undrain on the new balancer holds, though the
// relay's next heartbeat may still repeat the old drain.
func TestDrainOutlivesBalancerRestart(t *testing.T) {
	withKey := func(o *balancer.Options) { o.AdminKeys = []string{drainAdminKey} }
	b1 := newBalancer(t, 0, withKey)
	port := b1.Port()
	drained := newRelay(t, b1.URL(), "eu", nil)
	other := newRelay(t, b1.URL(), "eu", nil)
	api := newAPI(t, b1.URL())
	waitRegistered(t, api, drained.BootID(), other.BootID())
	admin := client.NewAdmin(b1.URL(), drainAdminKey)
	if _, err := admin.Drain(tctx(t), drained.BootID()); err != nil {
		t.Fatal(err)
	}
	instance := func(boot string) wire.Instance {
		in, _ := admin.Instance(tctx(t), boot)
		return in // zero while not registered
	}
	// twoBeats waits for two heartbeats of the relay: the first answer
	// after a change carries it, the second is sent after the relay read it.
	twoBeats := func(what string) {
		t.Helper()
		seen, last := 0, instance(drained.BootID()).LastHeartbeat
		testutil.Eventually(t, 20*heartbeat, what, func() bool {
			if hb := instance(drained.BootID()).LastHeartbeat; hb != last {
				seen, last = seen+1, hb
			}
			return seen >= 2
		})
	}
	twoBeats("two heartbeats after the drain")

	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	newBalancer(t, port, withKey)
	waitRegistered(t, api, drained.BootID(), other.BootID())
	if got := instance(drained.BootID()).Status; got != wire.InstanceDraining {
		t.Fatalf("after the balancer restart the drained relay is %q, want %q", got, wire.InstanceDraining)
	}
	for i := range 4 {
		if _, err := api.Allocate(tctx(t), "eu", roomName("drain-restart", i), client.NewAllocationID()); err != nil {
			t.Fatal(err)
		}
	}
	if in := instance(drained.BootID()); in.Rooms != 0 {
		t.Fatalf("the drained relay took %d new rooms after the restart", in.Rooms)
	}

	if _, err := admin.Undrain(tctx(t), drained.BootID()); err != nil {
		t.Fatal(err)
	}
	twoBeats("two heartbeats after the undrain")
	if got := instance(drained.BootID()).Status; got != wire.InstanceLive {
		t.Fatalf("after an undrain and two heartbeats the relay is %q, want %q", got, wire.InstanceLive)
	}
}
