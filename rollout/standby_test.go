package rollout_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

// The balancer's host fails with games playing (the emulator as shipped:
// standby_start 2 s, host_dns_drop 5 s, proxy_hold 5 s): Fly starts the
// standby launch made; allocations made on PurrNet's schedule (10 tries,
// 1 s apart) succeed through the app's URL, every hosted room is listed
// again, and a hosted room's name allocated anew is refused, never placed
// on a second relay. The host returns: the primary boots, the standby
// yields and stops, and the same holds. Recovery times are logged
// (RELIABILITY.md).
func TestBalancerHostFailure(t *testing.T) {
	t.Parallel()
	// A host per machine: the host that fails holds the balancer only
	// (a relay on it would take its rooms down with it, rightly).
	f := launchFleetTweak(t, "", true, func(c *flysim.Config) { c.HostsPerRegion = 8 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := rollout.Launch(ctx, f.opts("purrfly:v1")); err != nil {
		t.Fatalf("launch: %v", err)
	}
	bal := f.env.Balancer.Name
	ms, err := f.fc.List(ctx, bal, "")
	if err != nil {
		t.Fatal(err)
	}
	var primary, standby string
	for _, m := range ms {
		if len(m.Config.Standbys) > 0 {
			standby = m.ID
		} else {
			primary = m.ID
		}
	}
	if primary == "" || standby == "" || len(ms) != 2 {
		t.Fatalf("launch made %d balancer machines (primary %q, standby %q), want a primary and a standby", len(ms), primary, standby)
	}
	if f.sim.MachineHost(primary) == f.sim.MachineHost(standby) {
		t.Fatalf("standby on the primary's host %s", f.sim.MachineHost(primary))
	}

	g := newGames(t, f)
	g.startN("ams", 3)
	b := &client.Balancer{BaseURL: f.env.Balancer.URL, HTTP: f.hc, Timeout: 3 * time.Second}
	names := []string{"game-001-ams", "game-002-ams", "game-003-ams"}

	// recovered: a new room's allocation on PurrNet's schedule succeeds,
	// each hosted name is refused to a new allocation id (409), and every
	// hosted room is listed (joinable) again. It answers how long the
	// first allocation took.
	recovered := func(when string, since time.Time) time.Duration {
		t.Helper()
		if _, _, err := b.AllocateRetry(ctx, "ams", "probe-"+when, client.Retry{}); err != nil {
			t.Fatalf("%s: allocation on PurrNet's schedule failed: %v", when, err)
		}
		took := time.Since(since)
		for _, name := range names {
			_, _, err := b.AllocateRetry(ctx, "ams", name, client.Retry{Permanent: client.IsPermanent})
			var we *wire.Error
			if !errors.As(err, &we) || we.Code != wire.ErrRoomTaken.Code {
				t.Errorf("%s: hosted room %s allocated anew: %v, want room_name_taken (else it is on two relays)", when, name, err)
			}
			if _, err := b.JoinRetry(ctx, name, client.Retry{}); err != nil {
				t.Errorf("%s: hosted room %s not listed again: %v", when, name, err)
			}
		}
		return took
	}

	down := time.Now()
	if _, err := f.sim.FailHost(f.sim.MachineHost(primary)); err != nil {
		t.Fatal(err)
	}
	failover := recovered("host down", down)
	t.Logf("balancer host down: allocations succeed again %s after the failure (standby %s)", failover.Round(time.Millisecond), standby)
	// New games start and play on the standby. (Games whose players
	// connect while the balancers switch: RELIABILITY.md.)
	g.startN("ams", 2)

	up := time.Now()
	if _, err := f.sim.RestoreHost(f.sim.MachineHost(primary)); err != nil {
		t.Fatal(err)
	}
	settled := func() bool {
		m, err := f.fc.Get(ctx, bal, standby)
		return err == nil && m.State == "stopped"
	}
	testutil.Eventually(t, 30*time.Second, "the standby yields and stops once the primary's host is back", settled)
	settle := time.Since(up)
	failback := recovered("host up", up)
	g.startN("ams", 2)
	g.end()
	t.Logf("balancer host back: the standby stopped %s and allocations succeed %s after the host's return", settle.Round(time.Millisecond), failback.Round(time.Millisecond))
}
