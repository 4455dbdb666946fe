package rollout_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

const simAdminKey = "flysim-admin-key-0123456789abcdef" // fly/sim.toml's balancer ADMIN_KEY

// TestOverlapRetiringRelays: while replaced relays retire with games on
// them, the balancer is killed (-9) and started again: the relays register
// with its new boot within about a second of it answering, the retiring
// ones listed as retiring, and no new room goes to a retiring relay. Then
// retire_after passes with the games still running: a re-run with
// --wait-retired counts down, the relays close those games with 1012 and
// stop, and the rollout reports what was closed and destroys them.
func TestOverlapRetiringRelays(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	f.env.Timeouts.RetireAfter = d(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := newGames(t, f)
	g.cut = true // retire_after ends them: what they see is checked below
	g.startN("ams", 2)
	g.startN("sea", 1)
	old := map[string]string{}
	for _, app := range []string{"purrfly-relay-a", "purrfly-relay-b"} {
		old[f.machine(t, app).ID] = app
	}
	o := f.overlap("purrfly:v2")
	o.Observer = rollout.PlainPrinter(testWriter{t})
	if _, err := rollout.Run(ctx, o); err != nil {
		t.Fatalf("rollout: %v", err)
	}

	// The balancer dies and comes back: its restart policy (Fly's
	// default, on-failure) starts it again.
	bal := f.machine(t, "purrfly-balancer")
	b := &client.Balancer{BaseURL: f.env.Balancer.URL, HTTP: f.hc, Timeout: time.Second}
	oldBoot, _, err := b.Ping(ctx, f.env.Balancer.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.fc.Kill(ctx, "purrfly-balancer", bal.ID); err != nil {
		t.Fatal(err)
	}
	var answered time.Time
	testutil.Eventually(t, 20*time.Second, "the new balancer to answer", func() bool {
		p, _, err := b.Ping(ctx, f.env.Balancer.URL)
		answered = time.Now() // wall clock: measured, not asserted
		return err == nil && p.BootID != oldBoot.BootID
	})
	var insts []wire.Instance
	testutil.Eventually(t, 10*time.Second, "every relay to register with the new balancer", func() bool {
		var err error
		insts, err = b.Instances(ctx, simSecret)
		return err == nil && len(insts) == 4
	})
	t.Logf("relays registered with the restarted balancer %s after it first answered", time.Since(answered).Round(time.Millisecond))
	rooms := map[string]int64{}
	for _, in := range insts {
		_, isOld := old[in.MachineID]
		if isOld != (in.Status == wire.InstanceRetiring) {
			t.Errorf("after the balancer's restart %s is listed %s (old: %v)", in.MachineID, in.Status, isOld)
		}
		rooms[in.BootID] = in.Rooms
	}
	admin := client.NewAdmin(f.env.Balancer.URL, simAdminKey)
	admin.HTTP = f.hc
	for i := range 12 {
		region := []string{"ams", "sea"}[i%2]
		name := fmt.Sprintf("after-restart-%d", i)
		if _, err := b.Allocate(ctx, region, name, client.NewAllocationID()); err != nil {
			t.Fatalf("allocation after the restart: %v", err)
		}
		rm, err := admin.Room(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, isOld := old[rm.MachineID]; isOld {
			t.Errorf("room %s went to retiring machine %s", name, rm.MachineID)
		}
	}

	// retire_after passes with the games still on the old relays.
	w := f.overlap("purrfly:v2")
	w.WaitRetired = true
	var countdowns []rollout.Event
	logf := rollout.PlainPrinter(testWriter{t})
	w.Observer = func(ev rollout.Event) {
		logf(ev)
		if ev.Wait == rollout.WaitRetired {
			countdowns = append(countdowns, ev)
		}
	}
	res, err := rollout.Run(ctx, w)
	if err != nil {
		t.Fatalf("re-run with --wait-retired: %v", err)
	}
	if len(countdowns) == 0 || countdowns[0].Until.IsZero() || !strings.Contains(countdowns[0].Message, "player(s) left") {
		t.Errorf("--wait-retired counted down with %d events (%+v)", len(countdowns), countdowns)
	}
	closed := map[string]rollout.RetiringMachine{}
	for _, rm := range res.Retiring {
		closed[rm.Machine] = rm
	}
	for id, app := range old {
		rm, ok := closed[id]
		if !ok || !rm.Retired || rm.ClosedRooms == 0 || rm.ClosedPlayers == 0 {
			t.Errorf("%s %s: %+v, want retired at its latest stop with its rooms and players reported closed", app, id, rm)
		}
		if m, err := f.fc.Get(ctx, app, id); err == nil && m.State != "destroyed" {
			t.Errorf("%s %s is %s after --wait-retired, want destroyed", app, id, m.State)
		}
	}
	g.end()
	if len(g.interrupted) != 3 {
		t.Errorf("%d games ended at the latest stop, want the 3 old ones: %v", len(g.interrupted), g.interrupted)
	}
	for _, s := range g.interrupted {
		if strings.Contains(s, "ws host, ws clients") && !strings.Contains(s, "close status 1012") {
			t.Errorf("a WebSocket game closed by retire_after: %s, want 1012", s)
		}
	}
}
