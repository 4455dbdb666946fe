package rollout_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

// TestSecretRotationInterruptsNoGame rotates SECRET on a running fleet as
// README.md says: "old,new", then "new,old", then "new", each staged on
// every app (as `fly secrets set --stage`) and deployed by a rollout of the
// same image with --wait-retired, with games playing through each rollout
// and new ones starting all along; the games end once the relays are
// replaced, as games do, and the retired machines stop. No game is
// interrupted and no allocation or join fails; each rollout redeploys
// every machine (the secrets changed, not the image or the toml) and its
// registration phase sees every new boot registered; at the end the
// balancer takes the new value and refuses the old one.
func TestSecretRotationInterruptsNoGame(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, _ := launchedFleet(t, ctx)
	const next = "rotated-secret-2"
	for _, list := range []string{simSecret + "," + next, next + "," + simSecret, next} {
		for _, app := range f.apps {
			if _, err := f.fc.UpdateAppSecrets(ctx, app, map[string]*string{"SECRET": &list}); err != nil {
				t.Fatalf("stage SECRET=%s on %s: %v", list, app, err)
			}
		}
		g := newGames(t, f)
		g.startN("ams", 2)
		g.startN("sea", 2)
		stop := make(chan struct{})
		var starting sync.WaitGroup
		starting.Go(func() { g.keepStarting([]string{"ams", "sea"}, 1500*time.Millisecond, 60, stop) })
		var ending sync.Once
		endGames := func() {
			close(stop)
			starting.Wait()
			g.end()
		}
		f.env.Secret = list
		o := f.overlap("purrfly:v1")
		o.WaitRetired = true
		print := rollout.PlainPrinter(testWriter{t})
		o.Observer = func(ev rollout.Event) {
			print(ev)
			if ev.Phase == rollout.PhaseRetiring {
				go ending.Do(endGames) // the relays are replaced: the games end as games do
			}
		}
		res, err := rollout.Run(ctx, o)
		ending.Do(endGames)
		if err != nil {
			t.Fatalf("rollout with SECRET=%s: %v", list, err)
		}
		for _, mr := range res.Machines {
			if mr.Action == rollout.ActionVerified || mr.InterruptedRooms != 0 {
				t.Errorf("SECRET=%s: %s %s %s (interrupted %d rooms), want redeployed with nothing interrupted",
					list, mr.App, mr.Machine, mr.Action, mr.InterruptedRooms)
			}
		}
	}
	bal := client.NewBalancer(f.env.Balancer.URL)
	insts, err := bal.Instances(ctx, next)
	if err != nil {
		t.Fatalf("the balancer refuses the new SECRET: %v", err)
	}
	live := 0
	for _, in := range insts {
		if in.Status == wire.InstanceLive {
			live++
		}
	}
	want := 0
	for _, a := range f.env.Relays {
		want += max(a.Count, 1)
	}
	if live != want {
		t.Errorf("%d relays live after the rotation, want %d", live, want)
	}
	if _, err := bal.Instances(ctx, simSecret); err == nil {
		t.Error("the balancer still takes the old SECRET after the rotation")
	}
}
