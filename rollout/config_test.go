package rollout_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/rollout"
)

// The shipped fly/rollout.toml has prod and sim; sim matches fly/sim.toml.
func TestLoadShippedConfig(t *testing.T) {
	f, err := rollout.LoadFile("../fly/rollout.toml")
	if err != nil {
		t.Fatal(err)
	}
	prod, err := f.Env("prod")
	if err != nil {
		t.Fatal(err)
	}
	if prod.Token != "" || prod.Secret != "" || prod.MachinesAPI != "" {
		t.Errorf("prod must take credentials from the environment only")
	}
	if prod.Balancer.Name != "purrfly-balancer" || len(prod.Relays) != 2 || prod.Timeouts.MinHealthy.Duration != 15*time.Second {
		t.Errorf("prod: %+v", prod)
	}
	sim, err := f.Env("sim")
	if err != nil {
		t.Fatal(err)
	}
	if sim.MachinesAPI != "http://127.0.0.1:4280" || sim.Token != "flysim-dev-token" || sim.Secret != "flysim-secret" ||
		sim.Relays[0].URL != "http://127.0.0.1:4301" || sim.Relays[1].Name != "purrfly-relay-b" ||
		len(sim.Relays) != 3 || sim.Relays[2].URL != "http://127.0.0.1:4303" {
		t.Errorf("sim does not match fly/sim.toml: %+v", sim)
	}
	if _, err := f.Env("staging"); err == nil || !strings.Contains(err.Error(), "prod, sim") {
		t.Errorf("unknown env: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, body := range map[string]string{
		"unknown key": "[env.x]\nbalancer = { app = \"b\", url = \"http://b\" }\nrelays = [{ app = \"r\", url = \"http://r\" }]\ncolour = 1\n",
		"no relays":   "[env.x]\nbalancer = { app = \"b\", url = \"http://b\" }\n",
		"bad url":     "[env.x]\nbalancer = { app = \"b\", url = \"b.fly.dev\" }\nrelays = [{ app = \"r\", url = \"http://r\" }]\n",
		"twice":       "[env.x]\nbalancer = { app = \"b\", url = \"http://b\" }\nrelays = [{ app = \"b\", url = \"http://r\" }]\n",
		"bad timeout": "[env.x]\nbalancer = { app = \"b\", url = \"http://b\" }\nrelays = [{ app = \"r\", url = \"http://r\" }]\n[env.x.timeouts]\ndrain = \"soon\"\n",
		"short lease": "[env.x]\nbalancer = { app = \"b\", url = \"http://b\" }\nrelays = [{ app = \"r\", url = \"http://r\" }]\n[env.x.timeouts]\nlease_ttl = \"1s\"\n",
	} {
		p := filepath.Join(t.TempDir(), "rollout.toml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := rollout.LoadFile(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Missing credentials or image are configuration errors: nothing is called.
func TestRunConfigErrors(t *testing.T) {
	env := &rollout.Env{Name: "x", MachinesAPI: "http://127.0.0.1:9",
		Balancer: rollout.App{Name: "b", URL: "http://127.0.0.1:9"}, Relays: []rollout.App{{Name: "r", URL: "http://127.0.0.1:9"}}}
	for name, o := range map[string]rollout.Options{
		"no token":   {Env: env, Image: "purrfly:v2", Secret: "s"},
		"no secret":  {Env: env, Image: "purrfly:v2", Token: "t"},
		"no image":   {Env: env, Token: "t", Secret: "s"},
		"bad secret": {Env: env, Image: "purrfly:v2", Token: "t", Secret: "with space"},
		"no env":     {Image: "purrfly:v2", Token: "t", Secret: "s"},
	} {
		_, err := rollout.Run(t.Context(), o)
		var ce *rollout.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a ConfigError", name, err)
		}
	}
}

// TestConfigTimeoutDefaults: an environment without timeouts gets every
// default, a lease TTL of exactly 3 s is accepted, a negative timeout is
// refused.
func TestConfigTimeoutDefaults(t *testing.T) {
	load := func(extra string) (*rollout.Env, error) {
		p := filepath.Join(t.TempDir(), "rollout.toml")
		body := "[env.x]\nbalancer = { app = \"b\", url = \"http://b\" }\nrelays = [{ app = \"r\", url = \"http://r\" }]\n" + extra
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := rollout.LoadFile(p)
		if err != nil {
			return nil, err
		}
		return f.Env("x")
	}
	env, err := load("")
	if err != nil {
		t.Fatal(err)
	}
	to := env.Timeouts
	for name, got := range map[string][2]time.Duration{
		"drain": {to.Drain.Duration, rollout.DefaultDrain}, "wait": {to.Wait.Duration, rollout.DefaultWait},
		"min_healthy": {to.MinHealthy.Duration, rollout.DefaultMinHealthy}, "phase": {to.Phase.Duration, rollout.DefaultPhase},
		"lease_ttl": {to.LeaseTTL.Duration, rollout.DefaultLeaseTTL}, "lease_wait": {to.LeaseWait.Duration, rollout.DefaultLeaseWait},
		"poll": {to.Poll.Duration, rollout.DefaultPoll}, "smoke": {to.Smoke.Duration, rollout.DefaultSmoke},
	} {
		if got[0] != got[1] || got[1] <= 0 {
			t.Errorf("%s = %v, want the default %v", name, got[0], got[1])
		}
	}
	if env, err := load("[env.x.timeouts]\nlease_ttl = \"3s\"\n"); err != nil || env.Timeouts.LeaseTTL.Duration != 3*time.Second {
		t.Errorf("lease_ttl 3s: %v", err)
	}
	if _, err := load("[env.x.timeouts]\nwait = \"-1s\"\n"); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("a negative wait: %v", err)
	}
}
