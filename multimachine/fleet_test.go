package multimachine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"
	"github.com/superfly/fly-go/tokens"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// Names and credentials of testdata/fleet.toml.
const (
	balancerApp = "purrfly-balancer"
	relayApp    = "purrfly-relay-multi"
	secret      = "flysim-secret"
	region      = "ams"
)

// fleet is a running flysim organisation: the balancer and the
// multi-machine relay app, each a real purrctl process per machine.
type fleet struct {
	t        *testing.T
	sim      *flysim.Sim
	fc       *flaps.Client
	hc       *http.Client // every HTTP and WebSocket call of the test
	api      *client.Balancer
	balURL   string
	relayURL string
}

// startFleet loads testdata/fleet.toml, moves every listen address to a
// loopback range of its own (127.2xx.y.0/24: flysim's own tests use
// 127.1xx), shortens the relays' heartbeat and drain, and starts it.
func startFleet(t *testing.T) *fleet {
	t.Helper()
	cfg, err := flysim.LoadConfig("testdata/fleet.toml")
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("127.%d.%d", 200+rand.IntN(50), rand.IntN(250))
	cfg.MachinesAPI = base + ".1:0"
	cfg.DNS = base + ".1:0"
	cfg.MachineIPBase = base + ".2"
	for _, a := range cfg.Apps {
		_, port, err := net.SplitHostPort(a.Proxy)
		if err != nil {
			t.Fatal(err)
		}
		a.Proxy = net.JoinHostPort(base+".1", port)
		if a.Name == relayApp {
			a.Env["HOST_DOMAIN"] = base + ".1"
			a.Env["HEARTBEAT_SECONDS"] = "1"
			a.Env["DRAIN_TIMEOUT_SECONDS"] = "1"
			// The app's public UDP port, on the test's own address; the
			// relays advertise it.
			udpPort := 20000 + rand.IntN(20000)
			a.UDP[0].Port = udpPort
			a.Env["HOST_UDP_PORT_V2"] = strconv.Itoa(udpPort)
		}
	}
	logDir := t.TempDir()
	sim, err := flysim.New(cfg, flysim.Options{
		LogDir:     logDir,
		Logger:     slog.New(slog.DiscardHandler),
		Executable: purrctl,
		CheckRetry: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := sim.Start(ctx); err != nil {
		t.Fatalf("flysim start: %v", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	f := &fleet{
		t:        t,
		sim:      sim,
		hc:       &http.Client{Timeout: 10 * time.Second, Transport: tr},
		balURL:   sim.AppURL(balancerApp),
		relayURL: sim.AppURL(relayApp),
	}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if t.Failed() {
			dumpLogs(t, logDir)
		}
		if err := sim.Close(); err != nil {
			t.Errorf("flysim close: %v", err)
		}
		tr.CloseIdleConnections()
	})
	f.api = &client.Balancer{BaseURL: f.balURL, HTTP: f.hc}
	t.Setenv("FLY_FLAPS_BASE_URL", sim.State().MachinesAPI)
	flapsTr := &http.Transport{}
	t.Cleanup(flapsTr.CloseIdleConnections)
	f.fc, err = flaps.NewWithOptions(context.Background(), flaps.NewClientOpts{
		Tokens:    tokens.Parse(sim.State().Token),
		Transport: rateLimited{flapsTr},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// dumpLogs shows the end of every machine's output (most failures are
// explained there).
func dumpLogs(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, file := range files {
		b, _ := os.ReadFile(file)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("%s (tail):\n%s", filepath.Base(file), b)
	}
}

// ctx is a context bounded by d and the test's life.
func (f *fleet) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(f.t.Context(), d)
	f.t.Cleanup(cancel)
	return ctx
}

// instances lists the relay registrations (admin API).
func (f *fleet) instances() []wire.Instance {
	f.t.Helper()
	in, err := f.api.Instances(f.ctx(10*time.Second), secret)
	if err != nil {
		f.t.Fatalf("instances: %v", err)
	}
	return in
}

// waitMachines waits until the balancer lists exactly the relay machines
// ids, all live, and returns their instances by machine id.
func (f *fleet) waitMachines(ids []string) map[string]wire.Instance {
	f.t.Helper()
	var last []wire.Instance
	var out map[string]wire.Instance
	testutil.Eventually(f.t, 20*time.Second, fmt.Sprintf("the balancer to list exactly machines %v", ids), func() bool {
		last = f.instances()
		out = map[string]wire.Instance{}
		for _, in := range last {
			if in.Status == wire.InstanceLive {
				out[in.MachineID] = in
			}
		}
		if len(last) != len(ids) || len(out) != len(ids) {
			return false
		}
		for _, id := range ids {
			if _, ok := out[id]; !ok {
				return false
			}
		}
		return true
	})
	return out
}

// relayMachines lists the relay app's machines in the given state
// ("started", ...), by id.
func (f *fleet) relayMachines(state string) []string {
	f.t.Helper()
	ms, err := f.fc.List(f.ctx(10*time.Second), relayApp, state)
	if err != nil {
		f.t.Fatalf("list machines: %v", err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// launch creates one more relay machine with the config of an existing
// one (as `fly machine clone` does) and waits until it is started.
func (f *fleet) launch(like string) string {
	f.t.Helper()
	ctx := f.ctx(20 * time.Second)
	m, err := f.fc.Get(ctx, relayApp, like)
	if err != nil {
		f.t.Fatalf("get machine %s: %v", like, err)
	}
	nm, err := f.fc.Launch(ctx, relayApp, fly.LaunchMachineInput{Region: region, Config: m.Config})
	if err != nil {
		f.t.Fatalf("launch: %v", err)
	}
	// As on Fly, a machine just created may be "not found" for a moment:
	// the wait is asked again until it knows the machine.
	for {
		err := f.fc.Wait(ctx, relayApp, nm.ID, flaps.WithWaitStates("started"), flaps.WithWaitTimeout(15*time.Second))
		var fe *flaps.FlapsError
		if errors.As(err, &fe) && fe.ResponseStatusCode == http.StatusNotFound && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if err != nil {
			f.t.Fatalf("wait for %s started: %v", nm.ID, err)
		}
		return nm.ID
	}
}

// stop asks the Machines API to stop a machine with signal ("" = the
// app's kill_signal) and returns at once.
func (f *fleet) stop(id, signal string) {
	f.t.Helper()
	if err := f.fc.Stop(f.ctx(10*time.Second), relayApp, fly.StopMachineInput{ID: id, Signal: signal}, ""); err != nil {
		f.t.Fatalf("stop %s: %v", id, err)
	}
}

// waitStopped waits until the machine is stopped.
func (f *fleet) waitStopped(id string) {
	f.t.Helper()
	if err := f.fc.Wait(f.ctx(20*time.Second), relayApp, id, flaps.WithWaitStates("stopped"), flaps.WithWaitTimeout(15*time.Second)); err != nil {
		f.t.Fatalf("wait for %s stopped: %v", id, err)
	}
}

// locate asks the balancer's internal room-location route which machine
// holds room ("" when no live room has that name).
func (f *fleet) locate(room string) string {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.ctx(10*time.Second), http.MethodGet,
		f.balURL+wire.PathRoomLocation+"?name="+url.QueryEscape(room), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set(wire.HeaderInternalSecret, secret)
	resp, err := f.hc.Do(req)
	if err != nil {
		f.t.Fatalf("locate %s: %v", room, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusNotFound {
		return ""
	}
	var loc wire.RoomLocation
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &loc) != nil || loc.MachineID == "" {
		f.t.Fatalf("locate %s: %d %s", room, resp.StatusCode, body)
	}
	return loc.MachineID
}

// sumMetric is metric summed over machines.
func (f *fleet) sumMetric(machines []string, name string, labels ...string) float64 {
	f.t.Helper()
	n := 0.0
	for _, m := range machines {
		n += f.metric(m, name, labels...)
	}
	return n
}

// settleHolders waits until the balancer's view of the games' holders
// accounts for every room handover the machines report since handoversBefore
// (each moved room moved exactly once), records the new holders and
// returns how many rooms moved.
func (f *fleet) settleHolders(t *testing.T, games []*game, machines []string, handoversBefore float64) int {
	t.Helper()
	moved := 0
	holders := make([]string, len(games))
	testutil.Eventually(t, 10*time.Second, "the balancer to agree with the machines' handovers", func() bool {
		moved = 0
		for i, g := range games {
			holders[i] = f.locate(g.name)
			if holders[i] != g.holder {
				moved++
			}
		}
		return float64(moved) == f.sumMetric(machines, "purrfly_relay_mesh_handovers_total", `result="ok"`)-handoversBefore
	})
	for i, g := range games {
		if !slices.Contains(machines, holders[i]) {
			t.Fatalf("room %s is held by %q, not a machine of the app", g.name, holders[i])
		}
		g.holder = holders[i]
	}
	return moved
}

// metric sums a relay machine's Prometheus series name{labels...} whose
// label text contains every labels entry (e.g. `result="ok"`).
func (f *fleet) metric(machine, name string, labels ...string) float64 {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.ctx(10*time.Second), http.MethodGet, f.relayURL+"/metrics", nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set(wire.HeaderFlyForceInstance, machine)
	// Through the public proxy: the operator's credential is required.
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := f.hc.Do(req)
	if err != nil {
		f.t.Fatalf("metrics of %s: %v", machine, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("metrics of %s: status %d", machine, resp.StatusCode)
	}
	var sum float64
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if i := strings.LastIndexByte(line, ' '); ok && i > 0 {
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err == nil {
				sum += v
			}
		}
	}
	return sum
}

// rateLimited sends a request the Machines API rate-limited (429) again
// after its Retry-After, as any Fly client must (bodiless requests only:
// the test's gets, lists, waits and stops).
type rateLimited struct{ next http.RoundTripper }

func (r rateLimited) RoundTrip(req *http.Request) (*http.Response, error) {
	for try := 0; ; try++ {
		resp, err := r.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || try >= 10 || req.Body != nil && req.GetBody == nil {
			return resp, err
		}
		resp.Body.Close()
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		select {
		case <-time.After(time.Duration(max(wait, 1)) * time.Second):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
}
