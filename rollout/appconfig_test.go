package rollout_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/rollout"
)

// Each relay app of the shipped environments is fly/relay.toml with its
// own name, region and public address: no hand-copied toml per app.
func TestShippedRelayAppsComeFromTheTemplate(t *testing.T) {
	f, err := rollout.LoadFile("../fly/rollout.toml")
	if err != nil {
		t.Fatal(err)
	}
	prod, _ := f.Env("prod")
	b := prod.Relays[1].MachineConfig("registry.fly.io/purrfly:v3")
	if b == nil {
		t.Fatal("prod's relay-b is unmanaged")
	}
	for k, want := range map[string]string{
		"HOST_DOMAIN": "purrfly-relay-b.fly.dev", "HOST_SSL": "true", "HOST_WS_PORT": "443",
		"HOST_ENDPOINT": "https://purrfly-relay-b.fly.dev", "BALANCER_URL": "https://purrfly-balancer.fly.dev",
		"PRIMARY_REGION": "sea", "UDP_PORT_V2": "7778", "UDP_PORT": "7777", "PORT": "8081",
	} {
		if b.Env[k] != want {
			t.Errorf("prod relay-b %s = %q, want %q", k, b.Env[k], want)
		}
	}
	if b.Image != "registry.fly.io/purrfly:v3" || strings.Join(b.Init.Cmd, " ") != "relay" || len(b.Services) != 3 {
		t.Errorf("prod relay-b config %+v", b)
	}
	if bal := prod.Balancer.MachineConfig("i"); bal == nil || strings.Join(bal.Init.Cmd, " ") != "balancer" {
		t.Errorf("prod balancer config %+v", bal)
	}
	sim, _ := f.Env("sim")
	multi := sim.Relays[2].MachineConfig("purrfly:v1")
	for k, want := range map[string]string{
		"HOST_DOMAIN": "127.0.0.1", "HOST_SSL": "false", "HOST_WS_PORT": "4303", "HOST_UDP_PORT_V2": "4403", "HOST_UDP_PORT": "4413",
		"WEBSOCKET_PORT": "-1", "UDP_HOST": "{ip}", "BALANCER_URL": "http://127.0.0.1:4300",
	} {
		if multi.Env[k] != want {
			t.Errorf("sim relay-multi %s = %q, want %q", k, multi.Env[k], want)
		}
	}
}

func TestAppConfigLayers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("relay.toml", "primary_region = 'ams'\n[env]\nA = 'toml'\nB = 'toml'\nC = 'toml'\nHOST_SSL = 'toml'\n")
	write("bal.toml", "primary_region = 'ams'\n[env]\nPORT = '8080'\n")
	write("rollout.toml", `[env.x]
balancer = { app = "b", url = "http://b:8080", config = "bal.toml" }
relay_config = "relay.toml"
relays = [{ app = "r", url = "https://r.example", region = "sin", domain = "play.example", env = { C = "app" } }]
[env.x.relay_env]
B = "env"
C = "env"
`)
	f, err := rollout.LoadFile(filepath.Join(dir, "rollout.toml"))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := f.Env("x")
	c := x.Relays[0].MachineConfig("img")
	for k, want := range map[string]string{
		"A": "toml", "B": "env", "C": "app", "HOST_SSL": "true", "HOST_DOMAIN": "play.example",
		"HOST_WS_PORT": "443", "PRIMARY_REGION": "sin", "BALANCER_URL": "http://b:8080",
	} {
		if c.Env[k] != want {
			t.Errorf("%s = %q, want %q", k, c.Env[k], want)
		}
	}
	if x.Org != "personal" {
		t.Errorf("org %q", x.Org)
	}
}

func TestAppConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct{ rollout, relay, want string }{
		"two balancers": {`balancer = { app = "b", url = "http://b", count = 2 }` + "\nrelays = [{ app = \"r\", url = \"http://r\" }]\n", "", "count must be 1"},
		"bad region":    {"balancer = { app = \"b\", url = \"http://b\" }\nrelays = [{ app = \"r\", url = \"http://r\", region = \"Amsterdam\" }]\n", "", "not a Fly region"},
		"bad count":     {"balancer = { app = \"b\", url = \"http://b\" }\nrelays = [{ app = \"r\", url = \"http://r\", count = 99 }]\n", "", "out of range"},
		"missing toml":  {"balancer = { app = \"b\", url = \"http://b\" }\nrelay_config = \"nope.toml\"\nrelays = [{ app = \"r\", url = \"http://r\" }]\n", "", "nope.toml"},
		"bad toml":      {"balancer = { app = \"b\", url = \"http://b\" }\nrelay_config = \"relay.toml\"\nrelays = [{ app = \"r\", url = \"http://r\" }]\n", "primary_region = 'ams'\n[deploy]\nstrategy = 'canary'\n", "unsupported fly.toml keys: deploy"},
		"secret in env": {"balancer = { app = \"b\", url = \"http://b\" }\nrelay_config = \"relay.toml\"\nrelay_env = { SECRET = \"x\" }\nrelays = [{ app = \"r\", url = \"http://r\" }]\n", "primary_region = 'ams'\n", "env SECRET looks like a credential"},
		"no region":     {"balancer = { app = \"b\", url = \"http://b\" }\nrelay_config = \"relay.toml\"\nrelays = [{ app = \"r\", url = \"http://r\" }]\n", "[env]\nA = '1'\n", "no primary_region"},
	} {
		dir := t.TempDir()
		if tc.relay != "" {
			_ = os.WriteFile(filepath.Join(dir, "relay.toml"), []byte(tc.relay), 0o644)
		}
		p := filepath.Join(dir, "rollout.toml")
		_ = os.WriteFile(p, []byte("[env.x]\n"+tc.rollout), 0o644)
		if _, err := rollout.LoadFile(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to mention %q", name, err, tc.want)
		}
	}
}
