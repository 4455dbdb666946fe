//go:build unix

package flysim

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"

	"github.com/purrfly/purrfly/internal/testutil"
)

// TestFlapsDeployFlow walks through what flyctl and purrctl rollout do, with
// the real flaps client: list, get, lease, update to a new image with the
// nonce, wait for started at the new version, checks, release, cordon.
func TestFlapsDeployFlow(t *testing.T) {
	s := startSim(t, testConfig())
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	app, err := fc.GetApp(ctx, "web")
	if err != nil || app.Name != "web" || app.MachineCount != 2 || !app.Deployed() {
		t.Fatalf("GetApp = %+v, %v", app, err)
	}
	list, err := fc.List(ctx, "web", "")
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %d machines, %v", len(list), err)
	}
	ids := machineIDs(s, "web")
	m, err := fc.Get(ctx, "web", ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if m.State != StateStarted || m.Region != "ams" || len(m.ID) != 14 || m.Config.Image != "child:v1" ||
		m.ImageRef.Repository != "child" || m.ImageRef.Tag != "v1" || m.PrivateIP == "" ||
		m.Config.Env["APP_ENV"] != "sim" || len(m.Config.Services) != 1 || m.Config.Services[0].InternalPort != 8080 {
		t.Fatalf("Get = %+v (config %+v)", m, m.Config)
	}
	if ev := m.GetLatestEventOfType("start"); ev == nil || ev.Status != StateStarted {
		t.Fatalf("no start event: %+v", m.Events)
	}

	// The machine process sees Fly's environment.
	before := ping(t, s, "web", m.ID)
	if before.App != "web" || before.MachineID != m.ID || before.Region != "ams" || before.Version != m.Version ||
		before.ImageRef != "registry.fly.io/child:v1" || before.PrivateIP != m.PrivateIP || before.Process != "app" ||
		before.Primary != "ams" || before.DNSServer != s.State().DNS || before.AppEnv != "sim" {
		t.Fatalf("machine env = %+v", before)
	}

	// Its check passes on the running boot.
	testutil.Eventually(t, 10*time.Second, "check passing", func() bool {
		m, err := fc.Get(ctx, "web", ids[0])
		return err == nil && m.AllHealthChecks().AllPassing() && m.AllHealthChecks().Total == 1
	})

	// Lease: the second acquire is refused with 409 (flaps retries any
	// error for a minute, so give it a short deadline).
	ttl := 60
	l, err := fc.AcquireLease(ctx, "web", m.ID, &ttl)
	if err != nil || l.Data == nil || l.Data.Nonce == "" {
		t.Fatalf("AcquireLease = %+v, %v", l, err)
	}
	shortCtx, shortCancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = fc.AcquireLease(shortCtx, "web", m.ID, &ttl)
	shortCancel()
	if err == nil {
		t.Fatal("a second AcquireLease succeeded while the lease is held")
	}
	if status, body := apiDo(t, s, "POST", "/v1/apps/web/machines/"+m.ID+"/lease?ttl=60", testToken, nil); status != http.StatusConflict ||
		!strings.Contains(body["error"].(string), "lease currently held") {
		t.Fatalf("second acquire: %d %v, want a 409", status, body)
	}
	var ferr *flaps.FlapsError
	found, err := fc.FindLease(ctx, "web", m.ID)
	if err != nil || found.Data.Nonce != l.Data.Nonce {
		t.Fatalf("FindLease = %+v, %v", found, err)
	}
	refreshed, err := fc.RefreshLease(ctx, "web", m.ID, &ttl, l.Data.Nonce)
	if err != nil || refreshed.Data.Nonce != l.Data.Nonce {
		t.Fatalf("RefreshLease = %+v, %v", refreshed, err)
	}

	// Update without the nonce is refused; with it, it replaces the boot.
	cfg := m.Config
	cfg.Image = "child:v2"
	in := fly.LaunchMachineInput{ID: m.ID, Config: cfg, Region: m.Region}
	if _, err := fc.Update(ctx, "web", in, ""); !errors.As(err, &ferr) || ferr.ResponseStatusCode != http.StatusConflict {
		t.Fatalf("Update without nonce: %v, want a 409", err)
	}
	if err := fc.Stop(ctx, "web", fly.StopMachineInput{ID: m.ID}, "wrong-nonce"); !errors.As(err, &ferr) || ferr.ResponseStatusCode != http.StatusConflict {
		t.Fatalf("Stop with a wrong nonce: %v, want a 409", err)
	}
	updated, err := fc.Update(ctx, "web", in, l.Data.Nonce)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Version == m.Version || updated.InstanceID == m.InstanceID || updated.Config.Image != "child:v2" {
		t.Fatalf("update did not make a new version: %+v", updated)
	}
	if err := fc.Wait(ctx, "web", m.ID, flaps.WithWaitStates("started"), flaps.WithWaitVersion(updated.Version),
		flaps.WithWaitTimeout(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	after := pingEventually(t, s, "web", m.ID, "new boot answering", func(p pingInfo) bool { return p.Boot != before.Boot })
	if after.Boot == before.Boot || after.Pid == before.Pid || after.ImageRef != "registry.fly.io/child:v2" || after.Version != updated.Version {
		t.Fatalf("after update: %+v (before %+v)", after, before)
	}
	got, err := fc.Get(ctx, "web", m.ID)
	if err != nil || got.ImageRef.Tag != "v2" || got.GetLatestEventOfType("update") == nil {
		t.Fatalf("Get after update = %+v, %v", got, err)
	}
	// Checks restart from critical on the new boot, then pass again.
	testutil.Eventually(t, 10*time.Second, "check passing after update", func() bool {
		m, err := fc.Get(ctx, "web", ids[0])
		return err == nil && m.AllHealthChecks().AllPassing()
	})
	if err := fc.ReleaseLease(ctx, "web", m.ID, l.Data.Nonce); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.FindLease(ctx, "web", m.ID); !errors.As(err, &ferr) || ferr.ResponseStatusCode != http.StatusNotFound {
		t.Fatalf("FindLease after release: %v, want a 404", err)
	}

	// Cordon: the proxy stops balancing onto it; fly-force-instance-id still reaches it.
	if err := fc.Cordon(ctx, "web", m.ID, ""); err != nil {
		t.Fatal(err)
	}
	other := ids[1]
	for i := 0; i < 10; i++ {
		status, body := get(t, s.AppURL("web")+"/ping", map[string]string{"fly-prefer-region": "ams"})
		if status != http.StatusOK || !strings.Contains(string(body), other) {
			t.Fatalf("request %d reached %s while %s is cordoned: %d %s", i, body, m.ID, status, body)
		}
	}
	if p := ping(t, s, "web", m.ID); p.MachineID != m.ID {
		t.Fatalf("forced request went to %s", p.MachineID)
	}
	if err := fc.Uncordon(ctx, "web", m.ID, ""); err != nil {
		t.Fatal(err)
	}
	status, body := get(t, s.AppURL("web")+"/ping", map[string]string{"fly-prefer-region": "ams"})
	if status != http.StatusOK || !strings.Contains(string(body), m.ID) {
		t.Fatalf("after uncordon a request preferring ams reached %s", body)
	}

	// Wait answers 408 when the state is not reached in time.
	err = fc.Wait(ctx, "web", m.ID, flaps.WithWaitStates("stopped"), flaps.WithWaitTimeout(time.Second))
	if !errors.As(err, &ferr) || ferr.ResponseStatusCode != http.StatusRequestTimeout {
		t.Fatalf("Wait for stopped: %v, want a 408", err)
	}
}

// TestStopKillTimeout: stop sends kill_signal; a process that ignores it is
// SIGKILLed after kill_timeout; both end stopped with an exit event.
func TestStopKillTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.Apps[0].KillTimeout = Duration{1500 * time.Millisecond}
	cfg.Apps[0].Machines = []*MachineSpec{{Region: "ams", Image: "child:v1"}, {Region: "ams", Image: "child:stubborn"}}
	s := startSim(t, cfg)
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ids := machineIDs(s, "web")

	stop := func(id string) time.Duration {
		t.Helper()
		start := time.Now()
		if err := fc.Stop(ctx, "web", fly.StopMachineInput{ID: id}, ""); err != nil {
			t.Fatal(err)
		}
		if err := fc.Wait(ctx, "web", id, flaps.WithWaitStates("stopped"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if d := stop(ids[0]); d > 1200*time.Millisecond {
		t.Errorf("a process that honours SIGINT took %s to stop", d)
	}
	if d := stop(ids[1]); d < 1500*time.Millisecond || d > 6*time.Second {
		t.Errorf("a process that ignores SIGINT stopped after %s, want kill_timeout (1.5s)", d)
	}
	m, err := fc.Get(ctx, "web", ids[1])
	if err != nil {
		t.Fatal(err)
	}
	ev := m.GetLatestEventOfType("exit")
	if ev == nil || ev.Request == nil || ev.Request.ExitEvent == nil || ev.Request.ExitEvent.Signal != 9 || !ev.Request.ExitEvent.RequestedStop {
		t.Fatalf("exit event = %+v", ev)
	}
	// Start brings it back with a new process.
	if _, err := fc.Start(ctx, "web", ids[0], ""); err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", ids[0], flaps.WithWaitStates("started"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "restarted machine routable", func() bool { return routable(s, "web", ids[0]) })
	// The stubborn machine runs again at Close: Close must still end it (the
	// cleanup of startSim checks that no process survives).
	if _, err := fc.Start(ctx, "web", ids[1], ""); err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", ids[1], flaps.WithWaitStates("started"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenImage: a process that exits at once leaves its machine stopped
// with an exit event, whether it was created or updated onto that image.
func TestBrokenImage(t *testing.T) {
	cfg := testConfig()
	cfg.Apps[0].Machines = cfg.Apps[0].Machines[:1]
	s := startSim(t, cfg)
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	m, err := fc.Launch(ctx, "web", fly.LaunchMachineInput{Region: "sea", Config: &fly.MachineConfig{Image: "child:broken"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", m.ID, flaps.WithWaitStates("stopped"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := fc.Get(ctx, "web", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	ev := got.GetLatestEventOfType("exit")
	if got.State != StateStopped || ev == nil || ev.Request.ExitEvent.ExitCode != 3 || ev.Request.ExitEvent.RequestedStop {
		t.Fatalf("broken machine: state %s, exit event %+v", got.State, ev)
	}
	// Unknown images are refused up front.
	_, err = fc.Launch(ctx, "web", fly.LaunchMachineInput{Config: &fly.MachineConfig{Image: "nope:v9"}})
	var ferr *flaps.FlapsError
	if !errors.As(err, &ferr) || ferr.ResponseStatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("launch of an unknown image: %v", err)
	}
	// Destroy needs the machine stopped (or kill); then it is gone from List.
	running := machineIDs(s, "web")[0]
	if err := fc.Destroy(ctx, "web", fly.RemoveMachineInput{ID: running}, ""); !errors.As(err, &ferr) || ferr.ResponseStatusCode != http.StatusPreconditionFailed {
		t.Fatalf("destroy of a started machine: %v", err)
	}
	if err := fc.Destroy(ctx, "web", fly.RemoveMachineInput{ID: m.ID}, ""); err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", m.ID, flaps.WithWaitStates("destroyed"), flaps.WithWaitTimeout(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	list, err := fc.List(ctx, "web", "")
	if err != nil || len(list) != 1 || list[0].ID != running {
		t.Fatalf("List after destroy = %v, %v", list, err)
	}
}

// TestAPIErrors: the token is required and errors come in Fly's shape.
func TestAPIErrors(t *testing.T) {
	cfg := testConfig()
	cfg.Apps[0].Machines = nil
	s := startSim(t, cfg)
	for _, tc := range []struct {
		name, method, path, token string
		status                    int
	}{
		{"no token", "GET", "/v1/apps/web/machines", "", http.StatusUnauthorized},
		{"wrong token", "GET", "/v1/apps/web/machines", "nope", http.StatusUnauthorized},
		{"unknown app", "GET", "/v1/apps/nope/machines", testToken, http.StatusNotFound},
		{"unknown machine", "GET", "/v1/apps/web/machines/0123456789abcd", testToken, http.StatusNotFound},
		{"unknown route", "GET", "/v2/whatever", testToken, http.StatusNotFound},
	} {
		status, body := apiDo(t, s, tc.method, tc.path, tc.token, nil)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, status, tc.status)
		}
		if msg, _ := body["error"].(string); msg == "" || strings.Contains(msg, testToken) {
			t.Errorf("%s: error body %v", tc.name, body)
		}
	}
	// An app without started machines has no vms. record (NODATA), not an empty one.
	if in, out := lookup(t, s, "vms.web.internal", dns.TypeTXT, "udp"); in.Rcode != dns.RcodeSuccess || len(out) != 0 {
		t.Errorf("vms.web.internal of an empty app: rcode %d, %q", in.Rcode, out)
	}
}
