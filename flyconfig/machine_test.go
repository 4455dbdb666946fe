package flyconfig

import (
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
)

// The repository's own tomls are what rollout and launch deploy: they must
// parse and give the machine config a reader of them expects.
func TestRelayTomlBuildsItsMachineConfig(t *testing.T) {
	f, err := Load("../fly/relay.toml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.MachineConfig("registry.fly.io/purrfly:v2")
	if err != nil {
		t.Fatal(err)
	}
	if c.Image != "registry.fly.io/purrfly:v2" || strings.Join(c.Init.Cmd, " ") != "relay" {
		t.Errorf("image %q, cmd %q", c.Image, c.Init.Cmd)
	}
	if c.Env["UDP_PORT_V2"] != "7778" || c.Env["FLY_PROCESS_GROUP"] != "app" || c.Env["PRIMARY_REGION"] != f.PrimaryRegion {
		t.Errorf("env %v", c.Env)
	}
	if c.StopConfig == nil || *c.StopConfig.Signal != "SIGTERM" || c.StopConfig.Timeout.Duration != 45*time.Second {
		t.Errorf("stop config %+v", c.StopConfig)
	}
	if c.Guest == nil || c.Guest.MemoryMB != 512 || c.Guest.CPUKind != "shared" || c.Guest.CPUs != 1 {
		t.Errorf("guest %+v", c.Guest)
	}
	if c.Metrics == nil || c.Metrics.Port != 8081 || c.Metrics.Path != "/metrics" {
		t.Errorf("metrics %+v", c.Metrics)
	}
	if len(c.Services) != 3 {
		t.Fatalf("services %+v", c.Services)
	}
	http, udp, udp1 := c.Services[0], c.Services[1], c.Services[2]
	if http.Protocol != "tcp" || http.InternalPort != 8081 || len(http.Ports) != 2 || *http.Ports[0].Port != 80 ||
		!http.Ports[0].ForceHTTPS || *http.Ports[1].Port != 443 || http.Concurrency.HardLimit != 10000 {
		t.Errorf("http service %+v", http)
	}
	if *http.Autostop != fly.MachineAutostopOff || *http.Autostart || *http.MinMachinesRunning != 1 {
		t.Errorf("http service autostop %v autostart %v min %v", *http.Autostop, *http.Autostart, *http.MinMachinesRunning)
	}
	if len(http.Checks) != 1 || *http.Checks[0].HTTPPath != "/ping" || http.Checks[0].Interval.Duration != 10*time.Second {
		t.Errorf("http service checks %+v", http.Checks)
	}
	if udp.Protocol != "udp" || udp.InternalPort != 7778 || *udp.Ports[0].Port != 7778 {
		t.Errorf("udp service %+v", udp)
	}
	if udp1.Protocol != "udp" || udp1.InternalPort != 7777 || *udp1.Ports[0].Port != 7777 {
		t.Errorf("LiteNetLib 1.x udp service %+v", udp1)
	}
	// A retired relay exits 0 and must stay stopped: no service starts
	// it, and on-failure does not restart a clean exit.
	for _, sv := range c.Services {
		if sv.Autostart == nil || *sv.Autostart || sv.Autostop == nil || *sv.Autostop != fly.MachineAutostopOff {
			t.Errorf("%s service on %d: autostart %v, autostop %v; a retired relay must stay stopped", sv.Protocol, sv.InternalPort, sv.Autostart, sv.Autostop)
		}
	}
	if c.Restart == nil || c.Restart.Policy != fly.MachineRestartPolicyOnFailure {
		t.Errorf("restart %+v, want on-failure (a crash restarts, a retired relay's exit 0 does not)", c.Restart)
	}
	ready, ok := c.Checks["ready"]
	if !ok || *ready.HTTPPath != "/ready" || *ready.Port != 8081 || ready.GracePeriod.Duration != 2*time.Second {
		t.Errorf("checks %+v", c.Checks)
	}
}

func TestBalancerTomlBuildsItsMachineConfig(t *testing.T) {
	f, err := Load("../fly/balancer.toml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.MachineConfig("img")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Init.Cmd, " ") != "balancer" || c.Guest.MemoryMB != 256 || len(c.Services) != 1 || c.Services[0].InternalPort != 8080 {
		t.Errorf("config %+v", c)
	}
}

func TestParseRefusesWhatItWouldDrop(t *testing.T) {
	for name, tc := range map[string]struct{ toml, want string }{
		"unknown key":      {"app = 'a'\n[deploy]\nstrategy = 'rolling'\n", "unsupported fly.toml keys: deploy"},
		"two processes":    {"[processes]\napp = 'relay'\nworker = 'w'\n", "one process group"},
		"other group":      {"[processes]\nweb = 'relay'\n", `not "web"`},
		"bad signal":       {"kill_signal = 'SIGSEGV'\n", "kill_signal"},
		"kill timeout":     {"kill_timeout = 301\n", "kill_timeout"},
		"bad memory":       {"[[vm]]\nmemory = 'lots'\n", "memory"},
		"bad size":         {"[[vm]]\nsize = 'shared-cpu-3x'\n", "invalid machine size"},
		"bad protocol":     {"[[services]]\nprotocol = 'sctp'\ninternal_port = 1\n", "protocol"},
		"bad port":         {"[http_service]\ninternal_port = 70000\n", "internal_port"},
		"bad autostop":     {"[http_service]\ninternal_port = 80\nauto_stop_machines = 'maybe'\n", "auto_stop_machines"},
		"bad restart":      {"[[restart]]\npolicy = 'sometimes'\n", "policy"},
		"foreign process":  {"[http_service]\ninternal_port = 80\nprocesses = ['worker']\n", "processes"},
		"not toml":         {"app = \n", "invalid fly.toml"},
		"secret in a file": {"[secrets]\nSECRET = 'x'\n", "unsupported"},
	} {
		_, err := Parse([]byte(tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to mention %q", name, err, tc.want)
		}
	}
}

func TestParseReadsFlyctlForms(t *testing.T) {
	f, err := Parse([]byte("kill_timeout = '7s'\n[env]\nPORT = 8081\nDEBUG = true\n[build]\nimage = 'x'\n[[vm]]\nmemory = '1gb'\ncpus = 2\n[[restart]]\npolicy = 'on-failure'\nretries = 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.MachineConfig("i")
	if err != nil {
		t.Fatal(err)
	}
	if c.StopConfig.Timeout.Duration != 7*time.Second || c.Guest.MemoryMB != 1024 || c.Guest.CPUs != 2 ||
		c.Restart.Policy != fly.MachineRestartPolicyOnFailure || c.Restart.MaxRetries != 3 || c.Env["PORT"] != "8081" || c.Env["DEBUG"] != "true" {
		t.Errorf("config %+v %+v %+v %+v", c.StopConfig, c.Guest, c.Restart, c.Init)
	}
}
