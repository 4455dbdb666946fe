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
		`checks.ready.grace_period: - "10s"`, `checks.ready.interval: - "10s"`, `checks.ready.method: - "GET"`,
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
