//go:build unix

package flysim

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"

	"github.com/purrfly/purrfly/internal/testutil"
)

// unkindConfig is testConfig on the platform Fly is, with its delays
// short, plus "fresh", a reserved app with an http check on /healthz
// ("ready", top-level) beside its service's.
func unkindConfig() *Config {
	cfg := testConfig()
	cfg.Platform = DefaultPlatform()
	cfg.Platform.ListLag = Duration{600 * time.Millisecond}
	cfg.Platform.CreateNotFound = Duration{400 * time.Millisecond}
	cfg.Platform.ProxyHold = Duration{700 * time.Millisecond}
	cfg.Platform.DNSDelay = Duration{500 * time.Millisecond}
	cfg.Platform.TakenAppNames = []string{"purrfly", "gone"}
	cfg.Apps = append(cfg.Apps, &AppConfig{Name: "fresh", PrimaryRegion: "ams", Reserved: true})
	cfg.Images["child:nowhere"] = &Image{Command: []string{filepath.Join("/nonexistent", "flysim-no-such-binary")}}
	return cfg
}

// freshConfig is a machine config for "fresh": child:v1 on 8080 with a
// service check on /ping and, unless healthy, a top-level check that
// never passes.
func freshConfig(image string, healthy bool) *fly.MachineConfig {
	p80, port := 80, 8080
	typ, path, bad := "http", "/ping", "/no-such-route"
	c := &fly.MachineConfig{
		Image: image,
		Services: []fly.MachineService{{Protocol: "tcp", InternalPort: 8080,
			Ports:  []fly.MachinePort{{Port: &p80, Handlers: []string{"http"}}},
			Checks: []fly.MachineServiceCheck{{Type: &typ, HTTPPath: &path, Interval: &fly.Duration{Duration: time.Second}}},
		}},
	}
	if !healthy {
		c.Checks = map[string]fly.MachineCheck{"ready": {Type: &typ, Port: &port, HTTPPath: &bad, Interval: &fly.Duration{Duration: time.Second}}}
	}
	return c
}

// TestPlatformAppsNamesTokensAndDNS: a name another organisation holds is
// a 403 to read and a 422 name_taken to create; a deploy token reaches its
// own app only; a created app's proxy takes no connection until its first
// IP's name resolves, DNSDelay after the assignment.
func TestPlatformAppsNamesTokensAndDNS(t *testing.T) {
	s := startSim(t, unkindConfig())
	fc := flapsClient(t, s)
	ctx := t.Context()

	if code, body := apiDo(t, s, http.MethodGet, "/v1/apps/purrfly", testToken, nil); code != http.StatusForbidden {
		t.Fatalf("GET a taken app: %d %v, want 403", code, body)
	}
	if code, _ := apiDo(t, s, http.MethodGet, "/v1/apps/purrfly/machines", testToken, nil); code != http.StatusForbidden {
		t.Fatalf("list machines of a taken app: %d, want 403", code)
	}
	_, err := fc.CreateApp(ctx, flaps.CreateAppRequest{Name: "purrfly", Org: "personal"})
	var fe *flaps.FlapsError
	if !errors.As(err, &fe) || fe.ResponseStatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(fe.ResponseBody), `"name_taken"`) {
		t.Fatalf("create a taken name: %v, want 422 name_taken", err)
	}
	if code, _ := apiDo(t, s, http.MethodGet, "/v1/apps/web", testToken, nil); code != http.StatusOK {
		t.Fatalf("GET own app: %d", code)
	}

	deploy := s.State().DeployTokens
	if deploy["web"] == "" || deploy["web"] == testToken {
		t.Fatalf("deploy tokens in the state: %v", deploy)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/v1/apps/web", http.StatusOK},
		{http.MethodGet, "/v1/apps/web/machines", http.StatusOK},
		{http.MethodGet, "/v1/apps/fresh", http.StatusForbidden},
		{http.MethodGet, "/v1/apps", http.StatusForbidden},
		{http.MethodPost, "/v1/apps", http.StatusForbidden},
		{http.MethodPost, "/flysim/v1/faults", http.StatusForbidden},
	} {
		if code, body := apiDo(t, s, c.method, c.path, deploy["web"], nil); code != c.want {
			t.Errorf("deploy token of web: %s %s = %d %v, want %d", c.method, c.path, code, body, c.want)
		}
	}

	// DNS: "fresh" exists once created, but its name resolves only
	// DNSDelay after its first public IP.
	if _, err := fc.CreateApp(ctx, flaps.CreateAppRequest{Name: "fresh", Org: "personal"}); err != nil {
		t.Fatal(err)
	}
	reachable := func() bool {
		resp, err := httpClient().Get(s.AppURL("fresh") + "/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}
	if reachable() {
		t.Fatal("a created app without an IP is reachable by name")
	}
	if _, err := fc.AssignIP(ctx, "fresh", flaps.AssignIPRequest{Type: IPSharedV4}); err != nil {
		t.Fatal(err)
	}
	assigned := time.Now()
	if reachable() {
		t.Fatal("a new app is reachable the moment its IP is assigned")
	}
	testutil.Eventually(t, 5*time.Second, "the new app's name to resolve", reachable)
	if took := time.Since(assigned); took < 400*time.Millisecond {
		t.Errorf("the new app answered %v after its IP, want about dns_delay (500ms)", took)
	}
	// An app the config declares resolves from the start.
	if code, _ := get(t, s.AppURL("web")+"/ping", nil); code != http.StatusOK {
		t.Errorf("the declared app through its proxy: %d", code)
	}
}

// TestPlatformMachines: a created machine is missing from lists for
// ListLag and a 404 for CreateNotFound; the JSON has instance_id and no
// version, and wait takes instance_id; configs come back with Fly's
// defaults; an update shows replacing; a crashing process is restarted by
// the default policy (its exits say so); a command that cannot start is
// failed; the proxy routes on service checks only and holds a request
// while nothing is healthy; the API answers 429 with Retry-After.
func TestPlatformMachines(t *testing.T) {
	s := startSim(t, unkindConfig())
	fc := flapsClient(t, s)
	ctx := t.Context()
	if _, err := fc.CreateApp(ctx, flaps.CreateAppRequest{Name: "fresh", Org: "personal"}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.AssignIP(ctx, "fresh", flaps.AssignIPRequest{Type: IPSharedV4}); err != nil {
		t.Fatal(err)
	}

	m, err := fc.Launch(ctx, "fresh", fly.LaunchMachineInput{Region: "ams", Config: freshConfig("child:v1", false)})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	if m.Version != "" || m.InstanceID == "" {
		t.Errorf("created machine: version %q instance_id %q, want no version and an instance_id", m.Version, m.InstanceID)
	}
	if m.Config.Restart == nil || m.Config.Restart.Policy != fly.MachineRestartPolicyOnFailure || m.Config.Restart.MaxRetries != DefaultRestartMaxRetries ||
		m.Config.Guest == nil || m.Config.Guest.MemoryMB != DefaultMemoryMB {
		t.Errorf("created machine's config: restart %+v guest %+v, want Fly's defaults filled in", m.Config.Restart, m.Config.Guest)
	}
	if _, err := fc.Get(ctx, "fresh", m.ID); flapsStatus(err) != http.StatusNotFound {
		t.Errorf("get just after the create: %v, want 404", err)
	}
	if ms, err := fc.List(ctx, "fresh", ""); err != nil || len(ms) != 0 {
		t.Errorf("list just after the create: %d machines (%v), want none yet", len(ms), err)
	}
	testutil.Eventually(t, 5*time.Second, "the new machine in the list", func() bool {
		ms, err := fc.List(ctx, "fresh", "")
		return err == nil && len(ms) == 1 && ms[0].ID == m.ID
	})
	if since := time.Since(created); since < 500*time.Millisecond {
		t.Errorf("listed %v after its create, want about list_lag (600ms)", since)
	}
	// instance_id pins a wait, as Fly's spec says.
	if code, body := apiDo(t, s, http.MethodGet, "/v1/apps/fresh/machines/"+m.ID+"/wait?state=started&timeout=5&instance_id="+m.InstanceID, testToken, nil); code != http.StatusOK {
		t.Fatalf("wait at its instance_id: %d %v", code, body)
	}

	// Routing: its top-level check fails, its service check passes: the
	// proxy routes to it all the same.
	testutil.Eventually(t, 10*time.Second, "fresh routed on its service check", func() bool {
		code, _ := get(t, s.AppURL("fresh")+"/ping", nil)
		return code == http.StatusOK
	})
	if got, _ := fc.Get(ctx, "fresh", m.ID); got != nil {
		for _, c := range got.Checks {
			if c.Name == "ready" && c.Status == fly.Passing {
				t.Fatalf("the top-level check passes: %+v", c)
			}
		}
	}

	// An update shows replacing while the old process stops.
	leaseTTL := 30
	l, err := fc.AcquireLease(ctx, "fresh", m.ID, &leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	up, err := fc.Update(ctx, "fresh", fly.LaunchMachineInput{ID: m.ID, Config: freshConfig("child:broken", true)}, l.Data.Nonce)
	if err != nil {
		t.Fatal(err)
	}
	if up.State != StateReplacing {
		t.Errorf("state right after an update: %s, want replacing", up.State)
	}
	// Nothing healthy: a request is held for proxy_hold, then 503.
	began := time.Now()
	if code, _ := get(t, s.AppURL("fresh")+"/ping", nil); code != http.StatusServiceUnavailable {
		t.Errorf("with nothing healthy: %d, want 503", code)
	} else if held := time.Since(began); held < 600*time.Millisecond {
		t.Errorf("answered 503 after %v, want it held about proxy_hold (700ms)", held)
	}
	// The broken image exits 3, again and again: the default restart
	// policy brings it back, and its exit events say so.
	var restarts int
	testutil.Eventually(t, 10*time.Second, "a restarting exit event", func() bool {
		got, err := fc.Get(ctx, "fresh", m.ID)
		if err != nil {
			return false
		}
		for _, ev := range got.Events {
			if ev.Type == "exit" && ev.Request != nil && ev.Request.ExitEvent != nil && ev.Request.ExitEvent.Restarting &&
				ev.Request.ExitEvent.ExitCode == 3 && ev.Request.RestartCount >= 2 {
				restarts = ev.Request.RestartCount
				return true
			}
		}
		return false
	})
	t.Logf("restart count %d", restarts)
	if err := fc.ReleaseLease(ctx, "fresh", m.ID, l.Data.Nonce); err != nil {
		t.Fatal(err)
	}

	// A command that cannot start leaves the machine failed.
	bad, err := fc.Launch(ctx, "fresh", fly.LaunchMachineInput{Region: "ams", Config: freshConfig("child:nowhere", true)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the machine that cannot start to be failed", func() bool {
		got, err := fc.Get(ctx, "fresh", bad.ID)
		return err == nil && got.State == StateFailed
	})

	// Rate limits: a burst of 3 a second per action and machine, then 429
	// with Retry-After.
	var last int
	var retry string
	for range 5 {
		req, _ := http.NewRequest(http.MethodGet, s.State().MachinesAPI+"/v1/apps/web/machines/"+machineIDs(s, "web")[0]+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		last, retry = resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if last != http.StatusTooManyRequests || retry != "1" {
		t.Errorf("5 events calls at once: last %d Retry-After %q, want 429 and 1", last, retry)
	}
}

// TestPlatformTOMLDefaults: a TOML config without [platform] is Fly's
// platform, and so is the shipped fly/sim.toml, every behaviour on; a
// config that sets some keys keeps the others; bad values are refused.
func TestPlatformTOMLDefaults(t *testing.T) {
	c, err := LoadConfig("testdata/sim.toml")
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultPlatform()
	if c.Platform.ListLag != d.ListLag || !c.Platform.RateLimit || c.Platform.MachineVersion != MachineVersionAbsent ||
		len(c.Platform.TakenAppNames) != len(d.TakenAppNames) {
		t.Errorf("platform of a config without [platform]: %+v, want %+v", c.Platform, d)
	}
	shipped, err := LoadConfig("../fly/sim.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p := shipped.Platform; p.ListLag.Duration <= 0 || p.CreateNotFound.Duration <= 0 || !p.RateLimit ||
		p.DNSDelay.Duration <= 0 || p.ProxyHold.Duration <= 0 || !p.ConfigDefaults || !p.MidUpdateStates || !p.DeployTokens ||
		len(p.TakenAppNames) == 0 || p.DefaultRestart != "on-failure" || p.ProxyChecks != ProxyChecksService ||
		p.MachineVersion != MachineVersionAbsent {
		t.Errorf("fly/sim.toml's platform is kind somewhere: %+v", p)
	}
	for _, a := range shipped.Apps {
		// The proxy routes on service checks: every app's routing check
		// is its http service's, as [[http_service.checks]] in its toml.
		if len(a.ServiceChecks) == 0 || a.ServiceChecks[0].Path != "/ping" {
			t.Errorf("fly/sim.toml app %s has no service check on /ping: %+v", a.Name, a.ServiceChecks)
		}
		if mc := initialConfig(a, &MachineSpec{Image: "purrfly:v1"}); len(mc.Services[0].Checks) != 1 {
			t.Errorf("app %s's machines have %d service checks, want 1", a.Name, len(mc.Services[0].Checks))
		}
	}
	for _, bad := range []string{`list_lag = "-1s"`, `machine_version = "v2"`, `default_restart = "always"`, `proxy_checks = "some"`,
		`taken_app_names = ["Bad Name"]`, "other_org = \"personal\"\ntaken_app_names = [\"x\"]"} {
		p := filepath.Join(t.TempDir(), "sim.toml")
		writeFile(t, p, "[images.\"a:1\"]\ncommand = [\"true\"]\n[platform]\n"+bad+"\n")
		if _, err := LoadConfig(p); err == nil || !strings.Contains(err.Error(), "[platform]") {
			t.Errorf("[platform] %s: %v, want refused", bad, err)
		}
	}
	p := filepath.Join(t.TempDir(), "sim.toml")
	writeFile(t, p, "[images.\"a:1\"]\ncommand = [\"true\"]\n[platform]\nlist_lag = \"0s\"\ntaken_app_names = []\n")
	k, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if k.Platform.ListLag.Duration != 0 || len(k.Platform.TakenAppNames) != 0 || k.Platform.CreateNotFound != d.CreateNotFound {
		t.Errorf("[platform] list_lag = 0s: %+v", k.Platform)
	}
}

func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
}
