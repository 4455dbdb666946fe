package rollout_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

// writeEnvFile writes the fleet's environment as a rollout.toml (env "t")
// for a purrctl process, and returns its path.
func writeEnvFile(t *testing.T, f *fleet) string {
	t.Helper()
	var relays []string
	for _, a := range f.env.Relays {
		relays = append(relays, fmt.Sprintf("  { app = %q, url = %q },", a.Name, a.URL))
	}
	tm := f.env.Timeouts
	toml := fmt.Sprintf(`[env.t]
machines_api = %q
token = %q
secret = %q
balancer = { app = %q, url = %q }
relays = [
%s
]
  [env.t.timeouts]
  drain = %q
  wait = %q
  min_healthy = %q
  phase = %q
  lease_ttl = %q
  lease_wait = %q
  poll = %q
  smoke = %q
`, f.env.MachinesAPI, f.env.Token, f.env.Secret, f.env.Balancer.Name, f.env.Balancer.URL, strings.Join(relays, "\n"),
		tm.Drain, tm.Wait, tm.MinHealthy, tm.Phase, tm.LeaseTTL, tm.LeaseWait, tm.Poll, tm.Smoke)
	path := filepath.Join(t.TempDir(), "rollout.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOverlapRolloutKilledInEachPhase: `purrctl rollout` killed with -9 in
// each phase (a replacement created but not yet proven, a replacement
// proven as its old machine retires, between two relays, the balancer's
// update, the smoke test), then a plain re-run: it converges (every relay
// app has one started machine on the image, besides machines retiring),
// leaves no replacement mark and no duplicate machine, and finds every
// retiring machine again; at the end --wait-retired sees them all gone.
func TestOverlapRolloutKilledInEachPhase(t *testing.T) {
	t.Parallel()
	images := []string{"purrfly:v3", "purrfly:v4", "purrfly:v5", "purrfly:v6", "purrfly:v7"}
	f := startFleet(t, func(c *flysim.Config) {
		for _, img := range images {
			c.Images[img] = &flysim.Image{Command: c.Images["purrfly:v1"].Command, Ref: flysim.DefaultRegistry + "/" + img}
		}
	})
	config := writeEnvFile(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kills := []struct {
		where string
		at    func(ev rollout.Event) bool
	}{
		{"a replacement created, not proven", func(ev rollout.Event) bool {
			return ev.Status == rollout.StatusCreating && strings.Contains(ev.Message, "created: proving it")
		}},
		{"a replacement proven, its old machine retiring", func(ev rollout.Event) bool {
			return ev.Status == rollout.StatusDone && strings.Contains(ev.Message, "proven;")
		}},
		{"between two relays", func(ev rollout.Event) bool {
			return ev.App == "purrfly-relay-b" && ev.Status == rollout.StatusLeasing
		}},
		{"the balancer's update", func(ev rollout.Event) bool {
			return ev.Phase == rollout.PhaseBalancer && ev.Status == rollout.StatusUpdating
		}},
		{"the smoke test", func(ev rollout.Event) bool { return ev.Phase == rollout.PhaseSmoke }},
	}
	for i, k := range kills {
		image := images[i]
		cmd := exec.CommandContext(ctx, purrctlBin, "rollout", "t", "--config", config, "--image", image, "--json")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killed := false
		var at rollout.Event
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			var ev rollout.Event
			if json.Unmarshal(lines.Bytes(), &ev) == nil && ev.Wait == "" && k.at(ev) {
				_ = cmd.Process.Kill()
				killed, at = true, ev
				break
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("%s: the rollout to %s never got there", k.where, image)
		}
		if at.Replacement != "" {
			// The re-run comes once Fly's machine list shows what the
			// killed run made, as an operator's or CI's re-run does.
			testutil.Eventually(t, 10*time.Second, "the killed run's replacement listed", func() bool {
				ms, err := f.fc.List(ctx, at.App, "")
				return err == nil && slices.ContainsFunc(ms, func(m *fly.Machine) bool { return m.ID == at.Replacement })
			})
		}
		o := f.overlap(image)
		o.Observer = rollout.PlainPrinter(testWriter{t})
		if _, err := rollout.Run(ctx, o); err != nil {
			t.Fatalf("killed at %s: the re-run failed: %v", k.where, err)
		}
		f.converged(t, ctx, k.where, image)
	}
	o := f.overlap(images[len(kills)-1])
	o.WaitRetired = true
	if _, err := rollout.Run(ctx, o); err != nil {
		t.Fatalf("re-run with --wait-retired: %v", err)
	}
	for _, a := range f.env.Relays {
		if ms, err := f.fc.List(ctx, a.Name, ""); err != nil || len(ms) != 1 {
			t.Errorf("%s: %d machines after --wait-retired (%v), want 1", a.Name, len(ms), err)
		}
	}
	f.noLeases(t)
}

// converged checks each relay app after a re-run: one started machine on
// image that is neither retiring nor a replacement, every other machine
// retiring (and its relay says so, or it has stopped), none marked a
// replacement; the balancer lists the new boots live.
func (f *fleet) converged(t *testing.T, ctx context.Context, where, image string) {
	t.Helper()
	for _, a := range f.env.Relays {
		ms, err := f.fc.List(ctx, a.Name, "")
		if err != nil {
			t.Fatal(err)
		}
		current := 0
		for _, m := range ms {
			md := m.Config.Metadata
			switch {
			case md[rollout.MetaRole] == rollout.RoleReplacement:
				t.Errorf("killed at %s: %s %s still marked a replacement", where, a.Name, m.ID)
			case md[rollout.MetaRole] == rollout.RoleRetiring:
				if m.State != "started" {
					continue
				}
				testutil.Eventually(t, 10*time.Second, "retiring machine "+m.ID+" to say so or stop", func() bool {
					p, err := pingErr(f, a.Name, m.ID)
					return err != nil || p.Retiring
				})
			case m.State == "started" && m.Config.Image == image:
				current++
			default:
				t.Errorf("killed at %s: %s %s is %s on %s, neither retiring nor current", where, a.Name, m.ID, m.State, m.Config.Image)
			}
		}
		if current != 1 {
			t.Errorf("killed at %s: %s has %d current machines on %s, want 1", where, a.Name, current, image)
		}
	}
}

// pingErr reads /ping of one machine, or says why it cannot.
func pingErr(f *fleet, app, id string) (wire.Ping, error) {
	url := f.sim.AppURL(app)
	b := (&client.Balancer{BaseURL: url, HTTP: f.hc, Timeout: 2 * time.Second}).WithHeader(wire.HeaderFlyForceInstance, id)
	p, _, err := b.Ping(context.Background(), url)
	return p, err
}
