package flyconfig

import (
	"strings"
	"testing"

	fly "github.com/superfly/fly-go"
)

func relayConfig(t *testing.T, image string) *fly.MachineConfig {
	t.Helper()
	f, err := Load("../fly/relay.toml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.MachineConfig(image)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDiffNamesEachChangedField(t *testing.T) {
	live := relayConfig(t, "v1")
	want := relayConfig(t, "v2")
	want.Env["LOG_LEVEL"] = "debug"
	want.Env["DRAIN_TIMEOUT_SECONDS"] = "30"
	want.Services[0].Concurrency.SoftLimit = 6000
	delete(want.Checks, "ready")
	var got []string
	for _, c := range Diff(live, want) {
		got = append(got, c.String())
	}
	exp := []string{
		`checks.ready.grace_period: - "2s"`, `checks.ready.interval: - "10s"`, `checks.ready.method: - "GET"`,
		`checks.ready.path: - "/ready"`, `checks.ready.port: - 8081`, `checks.ready.timeout: - "2s"`, `checks.ready.type: - "http"`,
		`env.DRAIN_TIMEOUT_SECONDS: "25" -> "30"`, `env.LOG_LEVEL: + "debug"`,
		`image: "v1" -> "v2"`, `services[0].concurrency.soft_limit: 5000 -> 6000`,
	}
	if strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
	}
}

// What the Machines API adds (platform metadata, fields fly.toml does not
// manage) and zero values it drops must not count as a change, or every
// rollout would redeploy an unchanged fleet.
func TestDiffIgnoresWhatTheTomlDoesNotManage(t *testing.T) {
	want := relayConfig(t, "v1")
	live := Merge(nil, want)
	live.Metadata["fly_platform_version"] = "v2"
	live.Mounts = []fly.MachineMount{{Path: "/data", Volume: "vol_1"}}
	live.Schedule = "daily"
	live.Services[1].Concurrency = &fly.MachineServiceConcurrency{}
	if d := Diff(live, want); len(d) != 0 {
		t.Errorf("diff of an unchanged config: %v", d)
	}
}

func TestMergeKeepsUnmanagedFields(t *testing.T) {
	live := relayConfig(t, "v1")
	live.Mounts = []fly.MachineMount{{Path: "/data", Volume: "vol_1"}}
	live.Metadata["fly_platform_version"] = "v2"
	live.Env["STALE"] = "1"
	want := relayConfig(t, "v2")
	got := Merge(live, want)
	if got.Image != "v2" || len(got.Mounts) != 1 || got.Metadata["fly_platform_version"] != "v2" || got.Metadata["fly_process_group"] != "app" {
		t.Errorf("merged %+v", got)
	}
	if _, ok := got.Env["STALE"]; ok {
		t.Error("an env key removed from the toml survived the merge")
	}
	if live.Image != "v1" {
		t.Error("merge modified the live config")
	}
	got.Env["X"] = "y"
	if _, ok := want.Env["X"]; ok {
		t.Error("merge shares the desired config's maps")
	}
}

// A credential left in a machine's env is named in a diff, never shown.
func TestDiffHidesCredentials(t *testing.T) {
	live := relayConfig(t, "v1")
	live.Env["SECRET"] = "hunter2hunter2"
	live.Env["ADMIN_KEY"] = "k3y"
	want := relayConfig(t, "v1")
	want.Env["ADMIN_KEY"] = "other"
	var got []string
	for _, c := range Diff(live, want) {
		got = append(got, c.String())
	}
	s := strings.Join(got, "\n")
	if s != "env.ADMIN_KEY: (hidden) -> (hidden)\nenv.SECRET: - (hidden)" {
		t.Errorf("diff:\n%s", s)
	}
	for _, name := range []string{"SECRET", "ADMIN_KEY", "FLY_API_TOKEN", "db_password", "API_KEY"} {
		if !Sensitive(name) {
			t.Errorf("%s is not sensitive", name)
		}
	}
	for _, name := range []string{"GOMEMLIMIT", "HOST_DOMAIN", "MONKEY", "KEYBOARD_LAYOUT", "PORT"} {
		if Sensitive(name) {
			t.Errorf("%s is sensitive", name)
		}
	}
}

// What a real Machines API fills in by itself (a restart policy, a
// service's instance key, more metadata) is not a change; what the toml sets
// explicitly is compared exactly, zeros included: Fly's default for an
// unset autostart is true, so the toml's false against an unset one is a
// change.
func TestDiffAgainstPlatformDefaults(t *testing.T) {
	want := relayConfig(t, "v1")
	live := Merge(nil, want)
	live.Restart = &fly.MachineRestart{Policy: fly.MachineRestartPolicyOnFailure, MaxRetries: 10}
	live.Services[0].ForceInstanceKey = fly.Pointer("")
	live.Guest.MaxMemoryMB = 2048
	live.StopConfig = nil // not the toml's: it sets kill_signal, so this must show
	live.Metrics = nil
	var got []string
	for _, c := range Diff(live, want) {
		got = append(got, c.String())
	}
	exp := `metrics.path: + "/metrics"
metrics.port: + 8081
stop_config.signal: + "SIGTERM"
stop_config.timeout: + "45s"`
	if strings.Join(got, "\n") != exp {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), exp)
	}
	live = Merge(nil, want)
	live.Services[0].Autostart = nil
	if d := Diff(live, want); len(d) != 1 || d[0].String() != "services[0].autostart: + false" {
		t.Errorf("an explicit false against an unset autostart: %v", d)
	}
}

// Paths come in order: services[10] after services[2].
func TestDiffOrdersListItemsByIndex(t *testing.T) {
	live, want := &fly.MachineConfig{}, &fly.MachineConfig{}
	for i := 0; i < 12; i++ {
		live.Services = append(live.Services, fly.MachineService{InternalPort: 1000 + i})
		want.Services = append(want.Services, fly.MachineService{InternalPort: 2000 + i})
	}
	d := Diff(live, want)
	if len(d) != 12 || d[2].Path != "services[2].internal_port" || d[10].Path != "services[10].internal_port" {
		t.Errorf("order: %v", d)
	}
}
