package rollout_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/flysim"
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

// TestSimEnvFollowsThePortBase: fly/sim.toml and fly/rollout.toml's sim
// environment moved to the same port base still name the same ports: the
// Machines API, each relay app's proxy (and the HOST_WS_PORT derived from
// it) and its public UDP port; what is not one of the emulator's ports
// (UDP_PORT_V2, inside the machine) stays.
func TestSimEnvFollowsThePortBase(t *testing.T) {
	for _, base := range []int{4280, 20000, 64435} {
		cfg, err := flysim.LoadConfig("../fly/sim.toml")
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.MovePorts(base); err != nil {
			t.Fatal(err)
		}
		f, err := rollout.LoadFile("../fly/rollout.toml")
		if err != nil {
			t.Fatal(err)
		}
		env, err := f.Env("sim")
		if err != nil {
			t.Fatal(err)
		}
		if err := env.MovePorts(base); err != nil {
			t.Fatal(err)
		}
		if err := env.Validate(); err != nil {
			t.Fatal(err)
		}
		if env.MachinesAPI != "http://"+cfg.MachinesAPI {
			t.Errorf("base %d: machines_api %s, the sim's %s", base, env.MachinesAPI, cfg.MachinesAPI)
		}
		proxies := map[string]*flysim.AppConfig{}
		for _, a := range cfg.Apps {
			proxies[a.Name] = a
		}
		if want := "http://" + proxies[env.Balancer.Name].Proxy; env.Balancer.URL != want {
			t.Errorf("base %d: balancer url %s, want %s", base, env.Balancer.URL, want)
		}
		for _, r := range env.Relays {
			a := proxies[r.Name]
			if a == nil || r.URL != "http://"+a.Proxy {
				t.Errorf("base %d: relay %s url %s, the sim's proxy %+v", base, r.Name, r.URL, a)
				continue
			}
			mc := r.MachineConfig("purrfly:v1")
			_, port, _ := strings.Cut(a.Proxy, "127.0.0.1:")
			if mc.Env["HOST_WS_PORT"] != port || mc.Env["HOST_UDP_PORT_V2"] != strconv.Itoa(a.UDP[0].Port) || mc.Env["UDP_PORT_V2"] != "7778" {
				t.Errorf("base %d: relay %s env %v, want HOST_WS_PORT %s, HOST_UDP_PORT_V2 %d, UDP_PORT_V2 7778", base, r.Name, mc.Env, port, a.UDP[0].Port)
			}
			if a.Env["HOST_WS_PORT"] != port || a.Env["HOST_UDP_PORT_V2"] != strconv.Itoa(a.UDP[0].Port) {
				t.Errorf("base %d: the sim's own machines of %s: env %v", base, r.Name, a.Env)
			}
		}
	}
	f, err := rollout.LoadFile("../fly/rollout.toml")
	if err != nil {
		t.Fatal(err)
	}
	prod, _ := f.Env("prod")
	if err := prod.MovePorts(20000); err == nil {
		t.Error("prod (no port_base) moved its ports")
	}
	sim, _ := f.Env("sim")
	if err := sim.MovePorts(80); err == nil {
		t.Error("port base 80 accepted")
	}
}
