//go:build unix

package flysim

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestReservedConfig: a reserved app may only hold addresses; Empty makes
// fly/sim.toml an organisation of reserved apps that still validates and
// keeps the addresses; secrets in the TOML are bounded.
func TestReservedConfig(t *testing.T) {
	for name, tweak := range map[string]func(a *AppConfig){
		"machines":       func(a *AppConfig) { a.Machines = []*MachineSpec{{Image: "child:v1"}} },
		"env":            func(a *AppConfig) { a.Env = map[string]string{"A": "b"} },
		"cmd":            func(a *AppConfig) { a.Cmd = []string{"relay"} },
		"checks":         func(a *AppConfig) { a.Checks = map[string]*CheckConfig{"c": {}} },
		"secrets":        func(a *AppConfig) { a.Secrets = map[string]string{"A": "b"} },
		"restart_policy": func(a *AppConfig) { a.RestartPolicy = "always" },
	} {
		cfg := testConfig()
		a := &AppConfig{Name: "fresh", Reserved: true}
		tweak(a)
		cfg.Apps = append(cfg.Apps, a)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "reserved app") {
			t.Errorf("reserved app with %s: %v", name, err)
		}
	}
	cfg := testConfig()
	cfg.Apps = append(cfg.Apps, &AppConfig{Name: "fresh", Reserved: true})
	if err := cfg.Validate(); err != nil || cfg.Apps[1].InternalPort != DefaultReservedInternalPort || cfg.Apps[1].PrimaryRegion != DefaultRegion {
		t.Fatalf("bare reserved app: %v (%+v)", err, cfg.Apps[1])
	}

	for name, secrets := range map[string]map[string]string{
		"lower-case name": {"lower": "x"},
		"digit first":     {"1A": "x"},
		"long name":       {strings.Repeat("A", MaxSecretNameLen+1): "x"},
		"long value":      {"A": strings.Repeat("x", MaxSecretValueLen+1)},
		"NUL in value":    {"A": "x\x00y"},
	} {
		cfg := testConfig()
		cfg.Apps[0].Secrets = secrets
		if err := cfg.Validate(); err == nil {
			t.Errorf("secrets with a %s validated", name)
		}
	}

	sim, err := LoadConfig("../fly/sim.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range sim.Apps {
		if a.Secrets["SECRET"] == "" || a.Env["SECRET"] != "" {
			t.Errorf("fly/sim.toml app %s: SECRET belongs in [apps.secrets] (secrets %d, env %q)", a.Name, len(a.Secrets), a.Env["SECRET"])
		}
	}
	sim.Empty()
	if err := sim.Validate(); err != nil {
		t.Fatalf("fly/sim.toml emptied: %v", err)
	}
	for _, a := range sim.Apps {
		if !a.Reserved || len(a.Machines)+len(a.Env)+len(a.Cmd)+len(a.Checks)+len(a.Secrets) != 0 || a.RestartPolicy != "" || a.Proxy == "" {
			t.Errorf("emptied app %+v", a)
		}
	}
	if a := sim.Apps[1]; a.Name != "purrfly-relay-a" || len(a.UDP) != 2 || a.udpListenAddr(a.UDP[0]) != "127.0.0.1:4401" ||
		a.udpListenAddr(a.UDP[1]) != "127.0.0.1:4411" {
		t.Errorf("emptied relay app lost its UDP service: %+v", a.UDP)
	}
}

// TestEmptySimStarts: an emptied organisation starts with nothing running,
// every app reserved in State and the table, and no app known to the API.
func TestEmptySimStarts(t *testing.T) {
	cfg := udpConfig()
	cfg.Empty()
	s := startSim(t, cfg)
	if st := s.State().Apps["web"]; !st.Reserved || st.URL == "" || st.UDP["7778"] == "" {
		t.Fatalf("State = %+v", st)
	}
	var b strings.Builder
	s.WriteTable(&b)
	if !strings.Contains(b.String(), "reserved") {
		t.Fatalf("table:\n%s", b.String())
	}
	if status, body := apiDo(t, s, "GET", "/v1/apps/web", testToken, nil); status != 404 || body["error"] != "app not found" {
		t.Fatalf("GET /v1/apps/web: %d %v", status, body)
	}
	if status, _ := get(t, s.AppURL("web")+"/ping", nil); status != 503 {
		t.Fatalf("proxy of a reserved app answered %d", status)
	}
}

// TestConfigSecretsReachMachines: [apps.secrets] of a configured app are
// in its machines' environment, over the env of the same name, and never
// in the machine config the API shows.
func TestConfigSecretsReachMachines(t *testing.T) {
	cfg := testConfig()
	cfg.Apps[0].Secrets = map[string]string{"APP_ENV": "secret-wins"}
	s := startSim(t, cfg)
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := machineIDs(s, "web")[0]
	if p := ping(t, s, "web", id); p.AppEnv != "secret-wins" {
		t.Fatalf("APP_ENV = %q", p.AppEnv)
	}
	m, err := fc.Get(ctx, "web", id)
	if err != nil || m.Config.Env["APP_ENV"] != "sim" {
		t.Fatalf("config env = %v, %v", m.Config.Env, err)
	}
	list, err := fc.ListAppSecrets(ctx, "web", nil, false)
	if err != nil || len(list) != 1 || list[0].Name != "APP_ENV" || list[0].Value != nil {
		t.Fatalf("ListAppSecrets = %+v, %v", list, err)
	}
}
