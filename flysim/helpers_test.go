//go:build unix

package flysim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/superfly/fly-go/flaps"
	"github.com/superfly/fly-go/tokens"

	"github.com/purrfly/purrfly/internal/testutil"
)

const testToken = "test-token-123"

// testConfig is one app "web" with two machines (ams, sea) on child:v1, an
// http check on /healthz, and images for every child mode. Machine addresses
// start at a random 127.x.y.2 so parallel test binaries never collide.
func testConfig() *Config {
	child := func(mode string) *Image {
		return &Image{Command: []string{"{exe}"}, Env: map[string]string{
			"FLYSIM_TEST_CHILD": "1", "CHILD_MODE": mode,
			"GORACE": "atexit_sleep_ms=0", // a -race child otherwise lingers 1 s at exit
		}}
	}
	return &Config{
		Token:         testToken,
		MachineIPBase: fmt.Sprintf("127.%d.%d.2", 100+rand.IntN(100), rand.IntN(250)),
		Images: map[string]*Image{
			"child:v1":       child(""),
			"child:v2":       child(""),
			"child:broken":   child("broken"),
			"child:stubborn": child("ignore-int"),
		},
		Apps: []*AppConfig{{
			Name:          "web",
			PrimaryRegion: "ams",
			InternalPort:  8080,
			KillTimeout:   Duration{2 * time.Second},
			Env:           map[string]string{"APP_ENV": "sim"},
			Checks: map[string]*CheckConfig{
				"alive": {Type: "http", Path: "/healthz", Interval: Duration{time.Second}, Timeout: Duration{time.Second}},
			},
			Machines: []*MachineSpec{
				{Region: "ams", Image: "child:v1"},
				{Region: "sea", Image: "child:v1"},
			},
		}},
	}
}

// startSim starts a Sim and, at cleanup, closes it and checks that no
// process it ever started is still alive.
func startSim(tb testing.TB, cfg *Config) *Sim {
	tb.Helper()
	return startSimOpts(tb, cfg, Options{})
}

// startSimOpts is startSim with options (LogDir, Logger and CheckRetry are
// the tests' own).
func startSimOpts(tb testing.TB, cfg *Config, opts Options) *Sim {
	tb.Helper()
	opts.LogDir = tb.TempDir()
	opts.Logger = slog.New(slog.DiscardHandler)
	opts.CheckRetry = 50 * time.Millisecond
	s, err := New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() { // the machines' own output explains most failures
			files, _ := filepath.Glob(filepath.Join(s.LogDir(), "*.log"))
			for _, f := range files {
				b, _ := os.ReadFile(f)
				tb.Logf("%s:\n%s", filepath.Base(f), b)
			}
		}
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
		s.mu.Lock()
		pids := append([]int(nil), s.spawned...)
		s.mu.Unlock()
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				tb.Errorf("process %d survived Close (kill -0: %v)", pid, err)
			}
		}
	})
	return s
}

// flapsClient is the real fly-go v0.8.0 client pointed at the Sim through
// FLY_FLAPS_BASE_URL, as a deploy tool would be.
func flapsClient(tb testing.TB, s *Sim) *flaps.Client {
	tb.Helper()
	tb.Setenv("FLY_FLAPS_BASE_URL", s.State().MachinesAPI)
	tr := &http.Transport{}
	tb.Cleanup(tr.CloseIdleConnections)
	c, err := flaps.NewWithOptions(context.Background(), flaps.NewClientOpts{
		Tokens:    tokens.Parse(s.State().Token),
		Transport: tr,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// machineIDs lists the ids of an app's machines in config order.
func machineIDs(s *Sim, app string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.apps[app].order {
		out = append(out, m.id)
	}
	return out
}

// httpClient is a client without keep-alive (no idle connection outlives a test).
func httpClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// get sends a GET through an app's proxy with extra headers and returns the
// status and body.
func get(tb testing.TB, url string, hdr map[string]string) (int, []byte) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient().Do(req)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// ping reads /ping of one machine through the proxy (fly-force-instance-id).
func ping(tb testing.TB, s *Sim, app, id string) pingInfo {
	tb.Helper()
	status, body := get(tb, s.AppURL(app)+"/ping", map[string]string{"fly-force-instance-id": id})
	if status != http.StatusOK {
		tb.Fatalf("ping %s: %d %s", id, status, body)
	}
	var p pingInfo
	if err := json.Unmarshal(body, &p); err != nil {
		tb.Fatalf("ping %s: %v (%s)", id, err, body)
	}
	return p
}

// pingEventually polls /ping of one machine until cond holds (a started
// machine may not listen yet: "started" means the process runs, as on Fly).
func pingEventually(tb testing.TB, s *Sim, app, id string, what string, cond func(pingInfo) bool) pingInfo {
	tb.Helper()
	var last pingInfo
	testutil.Eventually(tb, 10*time.Second, what, func() bool {
		status, body := get(tb, s.AppURL(app)+"/ping", map[string]string{"fly-force-instance-id": id})
		if status != http.StatusOK {
			return false
		}
		last = pingInfo{}
		return json.Unmarshal(body, &last) == nil && cond(last)
	})
	return last
}

// routable reports whether the proxy would balance onto machine id.
func routable(s *Sim, app, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apps[app].machines[id].routableLocked(&s.cfg.Platform)
}

// apiDo sends a raw request to the Machines API (for what flaps cannot show:
// status codes and error bodies).
func apiDo(tb testing.TB, s *Sim, method, path, token string, hdr map[string]string) (int, map[string]any) {
	tb.Helper()
	req, err := http.NewRequest(method, s.State().MachinesAPI+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}
