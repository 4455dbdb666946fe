package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
)

// testSimCommand runs `purrctl sim` on the shipped fly/sim.toml (moved to a
// loopback range of its own so parallel test packages never collide), checks
// the state file and the table, passes `purrctl smoke` through the
// balancer's proxy in both regions, and after SIGINT finds no machine
// process left.
func testSimCommand(t *testing.T, bin string) {
	mark := testutil.RandomHex(8)
	cfgPath, stateURLs := simConfig(t, mark)
	state := filepath.Join(t.TempDir(), "state.json")
	sim := startProc(t, bin, localEnv(), regexp.MustCompile(`(Machines API)`),
		"sim", "--config", cfgPath, "--state", state, "--log-dir", t.TempDir())
	sim.match(t)
	testutil.Eventually(t, 30*time.Second, "the state file", func() bool {
		_, err := os.Stat(state)
		return err == nil
	})
	var st struct {
		MachinesAPI string                          `json:"machines_api"`
		Token       string                          `json:"token"`
		DNS         string                          `json:"dns"`
		Apps        map[string]struct{ URL string } `json:"apps"`
	}
	b, err := os.ReadFile(state)
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("state file %s: %v\n%s", state, err, b)
	}
	if st.MachinesAPI != stateURLs["machines_api"] || st.DNS != stateURLs["dns"] || st.Token == "" ||
		st.Apps["purrfly-balancer"].URL != stateURLs["purrfly-balancer"] || len(st.Apps) != 4 {
		t.Fatalf("state = %+v, want %v", st, stateURLs)
	}
	for _, app := range []string{"purrfly-balancer", "purrfly-relay-a", "purrfly-relay-b", "purrfly-relay-multi"} {
		if !strings.Contains(sim.output(), app) {
			t.Fatalf("the table does not list %s:\n%s", app, sim.output())
		}
	}
	bal := st.Apps["purrfly-balancer"].URL
	// Relays register within a retry or two of their checks passing.
	// /servers lists each relay app once per region: relay-a (ams), relay-b
	// (sea) and the three-machine relay-multi (ams).
	testutil.Eventually(t, 30*time.Second, "every relay registered", func() bool {
		s, err := client.NewBalancer(bal).Servers(t.Context())
		return err == nil && len(s) == 3
	})
	for _, region := range []string{"ams", "sea"} {
		smoke := exec.CommandContext(tctx(t), bin, "smoke", "--balancer", bal, "--region", region, "--strict-region", "--timeout", "10s")
		smoke.Env = localEnv()
		out, err := smoke.CombinedOutput()
		if err != nil {
			t.Fatalf("purrctl smoke in %s through the sim's proxy: %v\n%s\nsim output:\n%s", region, err, out, sim.output())
		}
		// Over WebSocket through the proxy, and over UDP through the app's
		// UDP service.
		for _, tr := range []string{"ws", "udp"} {
			if !strings.Contains(string(out), "smoke passed over "+tr) {
				t.Fatalf("purrctl smoke in %s did not pass over %s:\n%s", region, tr, out)
			}
		}
		// Host migration through the sim's proxies, connecting like
		// PurrNet (no session hint): in ams the room may land on the
		// multi-machine app.
		mig := exec.CommandContext(tctx(t), bin, "smoke", "--balancer", bal, "--region", region, "--migration",
			"--no-session-hint", "--timeout", "10s")
		mig.Env = localEnv()
		if out, err := mig.CombinedOutput(); err != nil || strings.Count(string(out), "migration smoke passed over") != 2 {
			t.Fatalf("purrctl smoke --migration in %s: %v\n%s\nsim output:\n%s", region, err, out, sim.output())
		}
	}
	if running := processesWith(t, "PURRFLY_E2E_MARK="+mark); len(running) != 6 {
		t.Fatalf("found %d marked machine processes while the sim runs, want 6 (the check below would prove nothing)", len(running))
	}
	sim.interrupt(t, 45*time.Second)
	if left := processesWith(t, "PURRFLY_E2E_MARK="+mark); len(left) > 0 {
		t.Fatalf("machine processes left after purrctl sim exited: %v", left)
	}
}

// simConfig rewrites fly/sim.toml onto 127.A.B.0/24 (A in 150..199) and
// tags every machine's env with mark. It returns the path and the URLs the
// state file must report.
func simConfig(t *testing.T, mark string) (string, map[string]string) {
	t.Helper()
	var cfg map[string]any
	if _, err := toml.DecodeFile(filepath.Join(moduleRoot(t), "fly", "sim.toml"), &cfg); err != nil {
		t.Fatal(err)
	}
	a, _ := rand.Int(rand.Reader, big.NewInt(50))
	bb, _ := rand.Int(rand.Reader, big.NewInt(250))
	base := fmt.Sprintf("127.%d.%d.", 150+a.Int64(), 1+bb.Int64())
	cfg["machines_api"] = base + "1:4280"
	cfg["dns"] = base + "1:5353"
	cfg["machine_ip_base"] = base + "10"
	want := map[string]string{"machines_api": "http://" + base + "1:4280", "dns": base + "1:5353"}
	apps, _ := cfg["apps"].([]map[string]any)
	if len(apps) != 4 {
		t.Fatalf("fly/sim.toml has %d apps, want the balancer, two relays and the multi-machine relay", len(apps))
	}
	for i, app := range apps {
		name, _ := app["name"].(string)
		addr := fmt.Sprintf("%s1:%d", base, 4300+i)
		app["proxy"] = addr
		want[name] = "http://" + addr
		env, _ := app["env"].(map[string]any)
		if env == nil { // the balancer has only [apps.secrets]
			env = map[string]any{}
			app["env"] = env
		}
		env["PURRFLY_E2E_MARK"] = mark
		env["HEARTBEAT_SECONDS"] = "1"
		if _, ok := env["HOST_WS_PORT"]; ok {
			env["HOST_WS_PORT"] = fmt.Sprint(4300 + i)
			env["HOST_DOMAIN"] = base + "1"
		}
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(cfg); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sim.toml")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// processesWith lists the pids whose environment holds kv.
func processesWith(t *testing.T, kv string) []string {
	t.Helper()
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil {
			continue
		}
		for _, e := range bytes.Split(env, []byte{0}) {
			if string(e) == kv {
				pids = append(pids, filepath.Base(d))
				break
			}
		}
	}
	return pids
}
