package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"
	"github.com/superfly/fly-go/tokens"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

const simSecret = "flysim-secret"

// multiApp is fly/sim.toml's relay app with three machines.
const multiApp = "purrfly-relay-multi"

// fleet is a running flysim of fly/sim.toml with short intervals.
type fleet struct {
	sim  *flysim.Sim
	cfg  *flysim.Config
	reg  *prometheus.Registry
	env  *rollout.Env
	hc   *http.Client
	tr   *http.Transport
	fc   *flaps.Client
	apps []string // relays in order, then the balancer
}

// startFleet loads ../fly/sim.toml, moves it to a random 127.A.B.0/24 (the
// proxies on .1 with the ports of the file, machines from .2) and a free
// Machines API and DNS port, so parallel test binaries never collide, and
// shortens heartbeat and drain. tweak may change the config further.
//
// The fleet leaves out fly/sim.toml's three-machine relay app, so that every
// app has exactly one machine; startFullFleet keeps it.
func startFleet(t *testing.T, tweak func(*flysim.Config)) *fleet {
	return startFleetOf(t, tweak, false)
}

// startFullFleet is startFleet with every app of fly/sim.toml, including
// the three-machine purrfly-relay-multi.
func startFullFleet(t *testing.T) *fleet { return startFleetOf(t, nil, true) }

func startFleetOf(t *testing.T, tweak func(*flysim.Config), multi bool) *fleet {
	t.Helper()
	var f *fleet
	var err error
	for try := 0; try < 3; try++ {
		if f, err = tryFleet(t, tweak, multi); err == nil {
			return f
		}
		t.Logf("sim start failed (will retry on another address): %v", err)
	}
	t.Fatal(err)
	return nil
}

func tryFleet(t *testing.T, tweak func(*flysim.Config), multi bool) (*fleet, error) {
	t.Helper()
	cfg, err := flysim.LoadConfig("../fly/sim.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !multi {
		cfg.Apps = slices.DeleteFunc(cfg.Apps, func(a *flysim.AppConfig) bool { return a.Name == multiApp })
	}
	prefix := fmt.Sprintf("127.%d.%d.", 200+rand.IntN(50), rand.IntN(250))
	cfg.MachinesAPI, cfg.DNS = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MachineIPBase = prefix + "2"
	for _, a := range cfg.Apps {
		a.Proxy = strings.Replace(a.Proxy, "127.0.0.1:", prefix+"1:", 1)
		if a.Env["HOST_DOMAIN"] != "" {
			a.Env["HOST_DOMAIN"] = prefix + "1"
		}
		if a.Env["BALANCER_URL"] != "" {
			a.Env["HEARTBEAT_SECONDS"] = "1"
			a.Env["DRAIN_TIMEOUT_SECONDS"] = "1"
		}
		a.KillTimeout = flysim.Duration{Duration: 5 * time.Second}
	}
	// Fly's platform as shipped, its delays shortened (each behaviour
	// still on) so that the suite's many creates stay quick; the
	// must-hold launch tests put the shipped platform back (shipped).
	cfg.Platform.ListLag = flysim.Duration{Duration: 500 * time.Millisecond}
	cfg.Platform.CreateNotFound = flysim.Duration{Duration: 300 * time.Millisecond}
	cfg.Platform.DNSDelay = flysim.Duration{Duration: time.Second}
	cfg.Platform.ProxyHold = flysim.Duration{Duration: time.Second}
	if tweak != nil {
		tweak(cfg)
	}
	reg := prometheus.NewRegistry()
	logDir := t.TempDir()
	sim, err := flysim.New(cfg, flysim.Options{
		Executable: purrctlBin, LogDir: logDir, Registerer: reg,
		Logger: slog.New(slog.DiscardHandler), CheckRetry: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sim.Start(ctx); err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	f := &fleet{sim: sim, cfg: cfg, reg: reg, tr: tr, hc: &http.Client{Transport: tr}}
	t.Cleanup(func() {
		if t.Failed() {
			files, _ := filepath.Glob(filepath.Join(logDir, "*.log"))
			for _, p := range files {
				b, _ := os.ReadFile(p)
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("%s:\n%s", filepath.Base(p), b)
			}
		}
		if err := sim.Close(); err != nil {
			t.Errorf("sim close: %v", err)
		}
		tr.CloseIdleConnections()
	})
	st := sim.State()
	f.env = &rollout.Env{
		Name: "test", MachinesAPI: st.MachinesAPI, Token: st.Token, Secret: simSecret,
		Balancer: rollout.App{Name: "purrfly-balancer", URL: sim.AppURL("purrfly-balancer")},
		Relays: []rollout.App{
			{Name: "purrfly-relay-a", URL: sim.AppURL("purrfly-relay-a")},
			{Name: "purrfly-relay-b", URL: sim.AppURL("purrfly-relay-b")},
		},
		Timeouts: rollout.Timeouts{
			Drain: d(1500 * time.Millisecond), Wait: d(15 * time.Second), MinHealthy: d(500 * time.Millisecond),
			Phase: d(40 * time.Second), LeaseTTL: d(3 * time.Second), LeaseWait: d(time.Second),
			Poll: d(100 * time.Millisecond), Smoke: d(5 * time.Second),
		},
	}
	f.apps = []string{"purrfly-relay-a", "purrfly-relay-b", "purrfly-balancer"}
	if multi {
		f.env.Relays = append(f.env.Relays, rollout.App{Name: multiApp, URL: sim.AppURL(multiApp)})
	}
	// The test's own flaps client reaches the sim through the same
	// rewriting the rollout uses: FLY_FLAPS_BASE_URL is read by flaps only.
	fc, err := flaps.NewWithOptions(context.Background(), flaps.NewClientOpts{
		Tokens: tokens.Parse(st.Token), Transport: rebaseTo(st.MachinesAPI, tr),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.fc = fc
	// Up means placeable: every relay registered and reachable by players
	// (a relay takes rooms only once the proxy routes to it); one given
	// another SECRET never registers.
	relays := 0
	for _, a := range cfg.Apps {
		if !a.Reserved && a.Env["BALANCER_URL"] != "" && a.Secrets["SECRET"] == simSecret {
			relays += len(a.Machines)
		}
	}
	if relays > 0 {
		b := &client.Balancer{BaseURL: f.env.Balancer.URL, HTTP: f.hc, Timeout: 2 * time.Second}
		testutil.Eventually(t, 15*time.Second, "every relay to be registered live", func() bool {
			insts, err := b.Instances(ctx, simSecret)
			live := 0
			for _, in := range insts {
				if in.Status == wire.InstanceLive {
					live++
				}
			}
			return err == nil && live == relays
		})
	}
	return f, nil
}

func d(v time.Duration) rollout.Duration { return rollout.Duration{Duration: v} }

// shipped puts fly/sim.toml's platform back into c, every delay as
// shipped.
func shipped(t *testing.T, c *flysim.Config) {
	t.Helper()
	s, err := flysim.LoadConfig("../fly/sim.toml")
	if err != nil {
		t.Fatal(err)
	}
	c.Platform = s.Platform
}

// opts are rollout options against the fleet, with the in-place strategy
// (the tests written for it); overlap are the default strategy's.
func (f *fleet) opts(image string) rollout.Options {
	o := f.overlap(image)
	o.Strategy = rollout.StrategyInPlace
	return o
}

func (f *fleet) overlap(image string) rollout.Options {
	return rollout.Options{
		Env: f.env, Image: image, HTTPClient: f.hc, Transport: f.tr,
		RetryBase: 50 * time.Millisecond,
	}
}

// machine reads one machine of app (each app has exactly one).
func (f *fleet) machine(t *testing.T, app string) *fly.Machine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ms, err := f.fc.List(ctx, app, "")
	if err != nil || len(ms) != 1 {
		t.Fatalf("list %s: %d machines, %v", app, len(ms), err)
	}
	return ms[0]
}

// updates counts the update events of a machine (one per Update call that
// reached the Machines API).
func updates(m *fly.Machine) int {
	n := 0
	for _, ev := range m.Events {
		if ev.Type == "update" {
			n++
		}
	}
	return n
}

// noLeases checks that no machine of the fleet holds a lease.
func (f *fleet) noLeases(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, app := range f.apps {
		ms, err := f.fc.List(ctx, app, "")
		if err != nil {
			t.Fatalf("list %s: %v", app, err)
		}
		for _, m := range ms {
			l, err := f.fc.FindLease(ctx, app, m.ID)
			var fe *flaps.FlapsError
			if err == nil || !errors.As(err, &fe) || fe.ResponseStatusCode != http.StatusNotFound {
				t.Errorf("machine %s of %s still has a lease: %+v (err %v)", m.ID, app, l, err)
			}
		}
	}
}

// apiCalls sums the Machines API requests per action seen by the sim.
func (f *fleet) apiCalls(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "purrfly_flysim_api_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// rebaseTo sends flaps' requests (built for FLY_FLAPS_BASE_URL or Fly's
// default) to base instead, and sends a request the Machines API
// rate-limited (429) again after its Retry-After, as any Fly client must.
func rebaseTo(base string, next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		for try := 0; ; try++ {
			out := r.Clone(r.Context())
			u := *r.URL
			u.Scheme, u.Host = "http", strings.TrimPrefix(base, "http://")
			out.URL, out.Host = &u, ""
			if r.GetBody != nil {
				body, err := r.GetBody()
				if err != nil {
					return nil, err
				}
				out.Body = body
			}
			resp, err := next.RoundTrip(out)
			if err != nil || resp.StatusCode != http.StatusTooManyRequests || try >= 10 || r.Body != nil && r.GetBody == nil {
				return resp, err
			}
			resp.Body.Close()
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			select {
			case <-time.After(time.Duration(max(wait, 1)) * time.Second):
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
	})
}

// listed waits until app's machine list (which lags a create on Fly and
// in the sim) shows n live machines.
func (f *fleet) listed(t *testing.T, app string, n int) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, fmt.Sprintf("%d machines of %s listed", n, app), func() bool {
		ms, err := f.fc.List(context.Background(), app, "")
		live := 0
		for _, m := range ms {
			if m.State != "destroyed" && m.State != "destroying" {
				live++
			}
		}
		return err == nil && live == n
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
