package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/testbin"
	"github.com/purrfly/purrfly/internal/testutil"
)

var (
	builtOnce sync.Once
	builtBin  string
	builtErr  error
	builtDir  string
)

// purrctlBin is the purrctl binary, built once for the package's tests
// that run it (removed by TestMain).
func purrctlBin(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		if builtDir, builtErr = os.MkdirTemp("", "purrctl-cli-"); builtErr == nil {
			builtBin, builtErr = testbin.Build(builtDir)
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// cliEnv is the environment of a purrctl the tests run: none of the
// developer's Fly or purrfly settings.
func cliEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FLY_") || strings.HasPrefix(k, "PURRFLY_") || k == "SECRET" || k == "ADMIN_KEY" || k == "CI" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// TestSimPortBase runs `purrctl sim` of the shipped fly/sim.toml at a port
// base of its own (PURRFLY_SIM_PORT_BASE), so it coexists with one at the
// default ports, and `purrctl rollout sim --dry-run` of the shipped
// fly/rollout.toml follows it with --sim-port-base, without an edited
// toml: its plan names every machine that sim runs. The sim's machines
// run the config the rollout would deploy (--rollout-config), so that
// first dry run changes nothing: every machine is verified, none has a
// config change.
func TestSimPortBase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs purrctl sim")
	}
	bin := purrctlBin(t)
	var base int
	var state string
	var sim *exec.Cmd
	var simOut *testutil.Buffer
	for try := 0; ; try++ {
		base = 20000 + rand.IntN(11)*1100 // below Linux's ephemeral ports (32768 up)
		state = filepath.Join(t.TempDir(), "state.json")
		simOut = &testutil.Buffer{}
		sim = exec.Command(bin, "sim", "--config", "../../fly/sim.toml", "--rollout-config", "../../fly/rollout.toml", "--state", state, "--log-dir", t.TempDir())
		sim.Env = cliEnv("PURRFLY_SIM_PORT_BASE=" + strconv.Itoa(base))
		sim.Stdout, sim.Stderr, sim.WaitDelay = simOut, simOut, 5*time.Second
		if err := sim.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- sim.Wait() }()
		up := testutil.Poll(60*time.Second, func() bool {
			select {
			case err := <-exited:
				exited <- err
				return true
			default:
			}
			_, err := os.Stat(state)
			return err == nil
		})
		select {
		case err := <-exited:
			if try < 2 && strings.Contains(simOut.String(), "address already in use") {
				continue // another test's port: another base
			}
			t.Fatalf("purrctl sim at port base %d exited: %v\n%s", base, err, simOut.String())
		default:
		}
		if !up {
			_ = sim.Process.Kill()
			t.Fatalf("purrctl sim at port base %d wrote no state:\n%s", base, simOut.String())
		}
		t.Cleanup(func() {
			_ = sim.Process.Signal(syscall.SIGINT)
			select {
			case <-exited:
			case <-time.After(60 * time.Second):
				_ = sim.Process.Kill()
				t.Errorf("purrctl sim did not stop on SIGINT")
			}
		})
		break
	}
	var st struct {
		MachinesAPI string `json:"machines_api"`
		Token       string `json:"token"`
		DNS         string `json:"dns"`
		Apps        map[string]struct {
			URL string            `json:"url"`
			UDP map[string]string `json:"udp"`
		} `json:"apps"`
	}
	b, err := os.ReadFile(state)
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("state: %v %s", err, b)
	}
	if st.MachinesAPI != fmt.Sprintf("http://127.0.0.1:%d", base) || st.DNS != fmt.Sprintf("127.0.0.1:%d", base+5353-4280) ||
		st.Apps["purrfly-relay-a"].URL != fmt.Sprintf("http://127.0.0.1:%d", base+4301-4280) ||
		st.Apps["purrfly-relay-b"].UDP["7778"] != fmt.Sprintf("127.0.0.1:%d", base+4402-4280) {
		t.Fatalf("state at port base %d: %+v", base, st)
	}

	var ids []string
	for _, app := range []string{"purrfly-balancer", "purrfly-relay-a", "purrfly-relay-b", "purrfly-relay-multi"} {
		var ms []struct {
			ID string `json:"id"`
		}
		req, _ := http.NewRequest(http.MethodGet, st.MachinesAPI+"/v1/apps/"+app+"/machines", nil)
		req.Header.Set("Authorization", "Bearer "+st.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&ms)
		resp.Body.Close()
		if err != nil || len(ms) == 0 {
			t.Fatalf("machines of %s: %v %v", app, ms, err)
		}
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dry := exec.CommandContext(ctx, bin, "rollout", "sim", "--image", "purrfly:v1", "--dry-run", "--config", "../../fly/rollout.toml",
		"--sim-port-base", strconv.Itoa(base))
	dry.Env = cliEnv()
	out, err := dry.CombinedOutput()
	if err != nil {
		t.Fatalf("rollout sim --dry-run --sim-port-base %d: %v\n%s", base, err, out)
	}
	for _, id := range ids {
		if !strings.Contains(string(out), id) {
			t.Errorf("the dry run at port base %d does not name machine %s:\n%s", base, id, out)
		}
	}
	if n := strings.Count(string(out), "will verify, not redeploy"); n != len(ids) || strings.Contains(string(out), "config change") {
		t.Errorf("a first dry run against the stock sim verifies %d of %d machines or lists config changes:\n%s", n, len(ids), out)
	}
	if strings.Contains(string(out), "not answering /ping") {
		t.Errorf("the dry run did not reach the machines through the moved proxies:\n%s", out)
	}
}

// runUntil runs cmd, reading its stdout line by line, and sends SIGINT
// once a line contains mark; it returns the output and the wait's error.
func runUntil(t *testing.T, cmd *exec.Cmd, mark string) (string, string, error) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	sent := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if !sent && strings.Contains(sc.Text(), mark) {
			sent = true
			_ = cmd.Process.Signal(syscall.SIGINT)
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	if !sent {
		return out.String(), stderr.String(), errors.Join(err, fmt.Errorf("no line with %q came", mark))
	}
	return out.String(), stderr.String(), err
}
