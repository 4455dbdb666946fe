package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/internal/testbin"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestRolloutPipedIntoHead runs the real binary as `purrctl rollout ENV
// --json --strategy in-place | head`: its stdout is a pipe whose reader goes away once the
// first relay is draining. The process must not die of SIGPIPE with its
// lease held: it stops as interrupted (exit 130, the cause said once on
// stderr), gives the relay back and releases its lease; a plain re-run
// then succeeds.
func TestRolloutPipedIntoHead(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flysim fleet")
	}
	bin, err := testbin.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sim, config := startSim(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "rollout", "t", "--config", config, "--image", "purrfly:v2", "--json", "--strategy", "in-place")
	cmd.Stdout, cmd.Stderr, cmd.WaitDelay = pw, &stderr, 5*time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close() // the child holds the write end now
	lines := bufio.NewScanner(pr)
	draining := false
	for !draining && lines.Scan() {
		draining = strings.Contains(lines.Text(), `"status":"draining"`)
	}
	pr.Close() // what head does after its lines
	err = cmd.Wait()
	if !draining {
		t.Fatalf("the rollout never drained a relay (%v); stderr:\n%s", err, stderr.String())
	}
	if st := cmd.ProcessState; st.ExitCode() != exitInterrupted {
		t.Fatalf("rollout piped into a closed reader: %v (exit %d), want exit %d; stderr:\n%s",
			st, st.ExitCode(), exitInterrupted, stderr.String())
	}
	msg := stderr.String()
	if !strings.Contains(msg, "the rollout's output could not be written") || !strings.Contains(msg, "broken pipe") ||
		strings.Count(msg, "broken pipe") != 1 || !strings.Contains(msg, "its leases were released") {
		t.Errorf("stderr %q: want the closed output said once and the leases released", msg)
	}

	// Both relays take rooms again (a restarted one once the proxy
	// routes to it: listed starting until then).
	var insts []wire.Instance
	testutil.Eventually(t, 10*time.Second, "both relays live at the balancer", func() bool {
		insts, err = client.NewBalancer(sim.AppURL("purrfly-balancer")).Instances(ctx, "flysim-secret")
		if err != nil || len(insts) != 2 {
			return false
		}
		for _, in := range insts {
			if in.Status != wire.InstanceLive {
				return false
			}
		}
		return true
	})
	for _, app := range []string{"purrfly-relay-a", "purrfly-relay-b", "purrfly-balancer"} {
		if held := leaseOf(t, sim, app); held != "" {
			t.Errorf("%s: %s", app, held)
		}
	}

	rerun := exec.CommandContext(ctx, bin, "rollout", "t", "--config", config, "--image", "purrfly:v2", "--strategy", "in-place")
	if out, err := rerun.CombinedOutput(); err != nil {
		t.Fatalf("plain re-run: %v\n%s", err, out)
	}
}

// startSim runs fly/sim.toml's two relays and balancer on a random
// 127.A.B.0/24 with short intervals, and writes a rollout environment "t"
// for it; it returns the sim and that file's path.
func startSim(t *testing.T, bin string) (*flysim.Sim, string) {
	t.Helper()
	var lastErr error
	for try := 0; try < 3; try++ {
		cfg, err := flysim.LoadConfig("../../fly/sim.toml")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Apps = slices.DeleteFunc(cfg.Apps, func(a *flysim.AppConfig) bool {
			return a.Name != "purrfly-balancer" && a.Name != "purrfly-relay-a" && a.Name != "purrfly-relay-b"
		})
		prefix := onRandomPrefix(cfg)
		for _, a := range cfg.Apps {
			if a.Env["HOST_DOMAIN"] != "" {
				a.Env["HOST_DOMAIN"] = prefix + "1"
			}
			if a.Env["BALANCER_URL"] != "" {
				a.Env["HEARTBEAT_SECONDS"], a.Env["DRAIN_TIMEOUT_SECONDS"] = "1", "1"
			}
			a.KillTimeout = flysim.Duration{Duration: 5 * time.Second}
		}
		sim, err := runSim(t, cfg, flysim.Options{Executable: bin, LogDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			lastErr = err
			continue
		}
		st := sim.State()
		toml := fmt.Sprintf(`[env.t]
machines_api = %q
token = %q
secret = "flysim-secret"
balancer = { app = "purrfly-balancer", url = %q }
relays = [
  { app = "purrfly-relay-a", url = %q },
  { app = "purrfly-relay-b", url = %q },
]
  [env.t.timeouts]
  drain = "1500ms"
  wait = "15s"
  min_healthy = "500ms"
  phase = "40s"
  lease_ttl = "3s"
  lease_wait = "1s"
  poll = "100ms"
  smoke = "5s"
`, st.MachinesAPI, st.Token, sim.AppURL("purrfly-balancer"), sim.AppURL("purrfly-relay-a"), sim.AppURL("purrfly-relay-b"))
		path := filepath.Join(t.TempDir(), "rollout.toml")
		if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		return sim, path
	}
	t.Fatalf("sim start failed: %v", lastErr)
	return nil, ""
}

// leaseOf says who holds a lease on the app's one machine ("" nobody).
func leaseOf(t *testing.T, sim *flysim.Sim, app string) string {
	t.Helper()
	st := sim.State()
	get := func(path string, into any) int {
		req, _ := http.NewRequest(http.MethodGet, st.MachinesAPI+path, nil)
		req.Header.Set("Authorization", "Bearer "+st.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if into != nil && resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var ms []struct {
		ID string `json:"id"`
	}
	if code := get("/v1/apps/"+app+"/machines", &ms); code != http.StatusOK || len(ms) != 1 {
		t.Fatalf("list %s: status %d, %d machines", app, code, len(ms))
	}
	if code := get("/v1/apps/"+app+"/machines/"+ms[0].ID+"/lease", nil); code != http.StatusNotFound {
		return fmt.Sprintf("machine %s still has a lease (find_lease: %d)", ms[0].ID, code)
	}
	return ""
}
