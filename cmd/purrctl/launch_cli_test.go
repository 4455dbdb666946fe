package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/flysim"
)

// startEmptySim runs an empty organisation of the shipped fly/sim.toml
// (its platform as shipped: Fly's unkindness on) with the balancer,
// purrfly-relay-a and purrfly-relay-multi reserved, on a random
// 127.A.B.0/24, and writes rollout environments for it: "t" (the
// balancer and relay-a, from the shipped tomls, with short timings), "d"
// (t plus relay-multi, count 3) and "u" (t without a pinned token: the
// token comes from FLY_API_TOKEN). tweak may change the config first.
func startEmptySim(t *testing.T, bin string, tweak func(*flysim.Config)) (*flysim.Sim, string) {
	t.Helper()
	var lastErr error
	for try := 0; try < 3; try++ {
		cfg, err := flysim.LoadConfig("../../fly/sim.toml")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Apps = slices.DeleteFunc(cfg.Apps, func(a *flysim.AppConfig) bool { return a.Name == "purrfly-relay-b" })
		cfg.Empty()
		onRandomPrefix(cfg)
		if tweak != nil {
			tweak(cfg)
		}
		sim, err := runSim(t, cfg, flysim.Options{Executable: bin, LogDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
			CheckRetry: 50 * time.Millisecond})
		if err != nil {
			lastErr = err
			continue
		}
		st := sim.State()
		fly, err := filepath.Abs("../../fly")
		if err != nil {
			t.Fatal(err)
		}
		udp := func(app string) string { _, p, _ := net.SplitHostPort(st.Apps[app].UDP["7778"]); return p }
		env := func(name, token, extra string) string {
			pin := ""
			if token != "" {
				pin = fmt.Sprintf("token = %q\n", token)
			}
			return fmt.Sprintf(`[env.%s]
machines_api = %q
%ssecret = "flysim-secret"
admin_key = "flysim-admin-key-0123456789abcdef"
balancer = { app = "purrfly-balancer", url = %q, config = %q }
relay_config = %q
relays = [
  { app = "purrfly-relay-a", url = %q, region = "ams", env = { HOST_UDP_PORT_V2 = %q } },
%s]
  [env.%s.relay_env]
  WEBSOCKET_PORT = "-1"
  DRAIN_TIMEOUT_SECONDS = "1"
  HEARTBEAT_SECONDS = "1"
  UDP_HOST = "{ip}"
  [env.%s.timeouts]
  drain = "1500ms"
  wait = "20s"
  min_healthy = "500ms"
  phase = "60s"
  lease_ttl = "3s"
  lease_wait = "1s"
  poll = "100ms"
  smoke = "5s"
  dns = "30s"
`, name, st.MachinesAPI, pin, sim.AppURL("purrfly-balancer"), filepath.Join(fly, "balancer.toml"), filepath.Join(fly, "relay.toml"),
				sim.AppURL("purrfly-relay-a"), udp("purrfly-relay-a"), extra, name, name)
		}
		multi := fmt.Sprintf(`  { app = "purrfly-relay-multi", url = %q, region = "ams", count = 3, env = { HOST_UDP_PORT_V2 = %q } },
`, sim.AppURL("purrfly-relay-multi"), udp("purrfly-relay-multi"))
		path := filepath.Join(t.TempDir(), "rollout.toml")
		body := env("t", st.Token, "") + env("d", st.Token, multi) + env("u", "", "")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return sim, path
	}
	t.Fatalf("sim start failed: %v", lastErr)
	return nil, ""
}

// exitCode is a finished command's exit code (-1 when it did not run).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// plainLine is a line of the plain printer: its time, then the phase and
// status columns.
var plainLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (.{8}) (.{12}) `)

// TestLaunchOutput runs `purrctl launch` as an operator does, from an
// empty organisation on the platform as shipped: a dry run numbers each
// machine it would create and tables them; the launch goes through in one
// pass, every line says its phase and status, an ordinary wait for a
// check is no "critical" alarm, and the table shows the state the
// Machines API reports; interrupted in its relays phase, it says to
// re-run the launch, not a rollout.
func TestLaunchOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flysim fleet")
	}
	bin := purrctlBin(t)
	_, config := startEmptySim(t, bin, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dry := exec.CommandContext(ctx, bin, "launch", "d", "--config", config, "--image", "purrfly:v1", "--dry-run")
	dry.Env = cliEnv()
	out, err := dry.CombinedOutput()
	if err != nil {
		t.Fatalf("launch --dry-run: %v\n%s", err, out)
	}
	for i := 1; i <= 3; i++ {
		if want := fmt.Sprintf("would create machine %d of 3 of purrfly-relay-multi in ams", i); !strings.Contains(string(out), want) {
			t.Errorf("the dry run does not say %q:\n%s", want, out)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^(balancer|relay) +\S+ +- +ams +- +purrfly:v1 +- +create`).FindAllString(string(out), -1)); n != 5 {
		t.Errorf("the dry run's table lists %d machines to create, want 5 (1 balancer, 1 + 3 relays):\n%s", n, out)
	}

	launch := exec.CommandContext(ctx, bin, "launch", "t", "--config", config, "--image", "purrfly:v1")
	launch.Env = cliEnv()
	out, err = launch.CombinedOutput()
	if err != nil {
		t.Fatalf("launch from an empty organisation: %v\n%s", err, out)
	}
	var table []string
	for _, line := range strings.Split(string(out), "\n") {
		switch m := plainLine.FindStringSubmatch(line); {
		case m != nil && (strings.TrimSpace(m[1]) == "" || strings.TrimSpace(m[2]) == ""):
			t.Errorf("a line without its phase or status: %q", line)
		case strings.Contains(line, " is critical"):
			t.Errorf("an ordinary wait reads as a failure: %q", line)
		case m == nil && (strings.HasPrefix(line, "relay ") || strings.HasPrefix(line, "balancer ")):
			table = append(table, line)
		}
	}
	if len(table) != 2 {
		t.Fatalf("the final table has %d machines, want 2:\n%s", len(table), out)
	}
	for _, row := range table {
		if f := strings.Fields(row); len(f) < 5 || f[4] != "started" {
			t.Errorf("the final table says %q, want state started (as the Machines API reports)", row)
		}
	}

	// Interrupted in its relays phase, a launch names itself in what to do.
	again := exec.CommandContext(ctx, bin, "launch", "t", "--config", config, "--image", "purrfly:v2")
	again.Env = cliEnv()
	stdout, stderr, err := runUntil(t, again, " relays ")
	if code := exitCode(err); code != exitInterrupted {
		t.Fatalf("launch interrupted in its relays phase: %v (exit %d)\n%s\n%s", err, code, stdout, stderr)
	}
	if !strings.Contains(stderr, "re-run the launch") || strings.Contains(stdout+stderr, "re-run the rollout") {
		t.Errorf("an interrupted launch should say to re-run the launch:\n%s", stderr)
	}
}

// TestLaunchRefusesTakenNamesAndNarrowTokens: with every app name of the
// environment held by another organisation, launch stops before creating
// anything, exit 2, naming the apps and the fix; with an app-scoped
// deploy token it names the token as the cause, exit 2.
func TestLaunchRefusesTakenNamesAndNarrowTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flysim organisation")
	}
	bin := purrctlBin(t)
	sim, config := startEmptySim(t, bin, func(c *flysim.Config) {
		c.Platform.TakenAppNames = []string{"purrfly-balancer", "purrfly-relay-a"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	launch := exec.CommandContext(ctx, bin, "launch", "t", "--config", config, "--image", "purrfly:v1")
	launch.Env = cliEnv()
	out, err := launch.CombinedOutput()
	if code := exitCode(err); code != 2 {
		t.Fatalf("launch with every name taken: %v (exit %d), want exit 2\n%s", err, code, out)
	}
	for _, want := range []string{"purrfly-balancer, purrfly-relay-a", "taken by another organisation", "choose names of your own", "nothing was created"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("launch with every name taken does not say %q:\n%s", want, out)
		}
	}
	if n := appsOf(t, sim, sim.State().Token); n != 0 {
		t.Errorf("launch with every name taken created %d apps", n)
	}

	other, config2 := startEmptySim(t, bin, nil)
	narrow := exec.CommandContext(ctx, bin, "launch", "u", "--config", config2, "--image", "purrfly:v1")
	narrow.Env = cliEnv("FLY_API_TOKEN=" + other.State().DeployTokens["purrfly-relay-a"])
	out, err = narrow.CombinedOutput()
	if code := exitCode(err); code != 2 {
		t.Fatalf("launch with a deploy token: %v (exit %d), want exit 2\n%s", err, code, out)
	}
	for _, want := range []string{"FLY_API_TOKEN cannot reach app(s) purrfly-balancer", "app-scoped deploy token", "fly tokens create org"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("launch with a deploy token does not say %q:\n%s", want, out)
		}
	}
	if n := appsOf(t, other, other.State().Token); n != 0 {
		t.Errorf("launch with a deploy token created %d apps", n)
	}
}

// appsOf counts the apps that exist in sim's organisation.
func appsOf(t *testing.T, sim *flysim.Sim, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, sim.State().MachinesAPI+"/v1/apps?org_slug=personal", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Total int `json:"total_apps"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Total
}
