//go:build unix

package flysim

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadConfigExample(t *testing.T) {
	c, err := LoadConfig("testdata/sim.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "flysim-dev-token" || c.MachinesAPI != "127.0.0.1:4280" || c.DNS != "127.0.0.1:5353" || len(c.Apps) != 3 {
		t.Fatalf("config = %+v", c)
	}
	relay := c.Apps[1]
	if relay.Name != "purrfly-relay-a" || relay.InternalPort != 8081 || relay.KillSignal != "SIGTERM" ||
		relay.KillTimeout.Duration != 30*time.Second || relay.EdgeRegion != "ams" || relay.Env["BALANCER_URL"] != "{url:purrfly-balancer}" ||
		relay.Checks["ping"].Interval.Duration != 2*time.Second || relay.Checks["ping"].Port != 8081 ||
		relay.Checks["ping"].Timeout.Duration != DefaultCheckTimeout || len(relay.Cmd) != 1 {
		t.Fatalf("relay app = %+v", relay)
	}
	if c.Apps[2].Machines[0].Region != "sea" || c.Images["purrfly:v2"].Ref != "registry.fly.io/purrfly:v2" {
		t.Fatalf("defaults not filled: %+v", c.Apps[2].Machines[0])
	}
	if len(relay.UDP) != 1 || *relay.UDP[0] != (UDPService{InternalPort: 7778, Port: 4401}) ||
		relay.udpListenAddr(relay.UDP[0]) != "127.0.0.1:4401" || len(c.Apps[2].UDP) != 0 {
		t.Fatalf("udp services: %+v", relay.UDP)
	}
	mc := initialConfig(relay, relay.Machines[0])
	if len(mc.Services) != 2 || mc.Services[1].Protocol != "udp" || mc.Services[1].InternalPort != 7778 ||
		*mc.Services[1].Ports[0].Port != 7778 {
		t.Fatalf("machine services: %+v", mc.Services)
	}
}

// TestLoadShippedConfig: fly/sim.toml loads, and each relay app has its UDP
// services, LiteNetLib 2.x on 7778 and 1.x on 7777, at the public ports
// its env advertises.
func TestLoadShippedConfig(t *testing.T) {
	c, err := LoadConfig("../fly/sim.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{"purrfly-relay-a": {"4401", "4411"}, "purrfly-relay-b": {"4402", "4412"}, "purrfly-relay-multi": {"4403", "4413"}}
	for _, a := range c.Apps {
		ports, ok := want[a.Name]
		if !ok {
			continue
		}
		delete(want, a.Name)
		if len(a.UDP) != 2 || a.UDP[0].InternalPort != 7778 || a.udpListenAddr(a.UDP[0]) != "127.0.0.1:"+ports[0] ||
			a.UDP[1].InternalPort != 7777 || a.udpListenAddr(a.UDP[1]) != "127.0.0.1:"+ports[1] ||
			a.Env["UDP_HOST"] != "{ip}" || a.Env["UDP_PORT_V2"] != "7778" || a.Env["HOST_UDP_PORT_V2"] != ports[0] ||
			a.Env["UDP_PORT"] != "7777" || a.Env["HOST_UDP_PORT"] != ports[1] {
			t.Errorf("%s: udp %+v, env %v", a.Name, a.UDP, a.Env)
		}
	}
	if len(want) > 0 {
		t.Errorf("apps missing: %v", want)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	base := `
[images."a:v1"]
command = ["/bin/true"]
[[apps]]
name = "web"
internal_port = 8080
`
	for name, tc := range map[string]struct{ toml, want string }{
		"unknown key":     {base + "colour = \"red\"\n", "unknown keys"},
		"unknown image":   {base + "[[apps.machines]]\nimage = \"b:v1\"\n", "unknown image"},
		"bad region":      {base + "[[apps.machines]]\nimage = \"a:v1\"\nregion = \"Amsterdam\"\n", "bad region"},
		"bad signal":      {base + "kill_signal = \"SIGFOO\"\n", "unknown kill_signal"},
		"kill_timeout":    {base + "kill_timeout = 301\n", "kill_timeout"},
		"duplicate app":   {base + "[[apps]]\nname = \"web\"\ninternal_port = 1\n", "appears twice"},
		"no port":         {strings.Replace(base, "internal_port = 8080", "", 1), "internal_port"},
		"bad machine id":  {base + "[[apps.machines]]\nimage = \"a:v1\"\nid = \"xyz\"\n", "14 lower-case hex"},
		"no images":       {"[[apps]]\nname = \"web\"\ninternal_port = 1\n", "no [images]"},
		"non-loopback ip": {"machine_ip_base = \"10.0.0.1\"\n" + base, "loopback"},
		"udp no port":     {base + "[[apps.udp]]\nport = 4401\n", "internal_port 0 out of range"},
		"udp big port":    {base + "[[apps.udp]]\ninternal_port = 7778\nport = 70000\n", "port 70000 out of range"},
		"udp twice":       {base + "[[apps.udp]]\ninternal_port = 7778\n[[apps.udp]]\ninternal_port = 7778\n", "internal_port 7778 appears twice"},
		"udp port twice":  {base + "[[apps.udp]]\ninternal_port = 1\nport = 9\n[[apps.udp]]\ninternal_port = 2\nport = 9\n", "udp port 9 appears twice"},
		"udp shared addr": {base + "proxy = \"127.0.0.1:4300\"\n[[apps.udp]]\ninternal_port = 1\nport = 9\n" +
			"[[apps]]\nname = \"two\"\ninternal_port = 8080\nproxy = \"127.0.0.1:4301\"\n[[apps.udp]]\ninternal_port = 1\nport = 9\n",
			"already the one of app web"},
	} {
		p := filepath.Join(t.TempDir(), "sim.toml")
		if err := os.WriteFile(p, []byte(tc.toml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, tc.want)
		}
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"exe": "/bin/purrctl", "ip": "127.0.0.5"}
	urls := func(app string) (string, bool) { return "http://127.0.0.1:9/" + app, app == "bal" }
	got := expand("{exe} --host {ip} --b {url:bal} {url:nope} {unknown}", vars, urls)
	if got != "/bin/purrctl --host 127.0.0.5 --b http://127.0.0.1:9/bal {url:nope} {unknown}" {
		t.Fatalf("expand = %q", got)
	}
}

// TestStateAndTable: the state file's JSON keys, and the table names every
// app, machine and URL.
func TestStateAndTable(t *testing.T) {
	var out bytes.Buffer
	cfg := testConfig()
	s, err := New(cfg, Options{LogDir: t.TempDir(), Stdout: &out, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s.State())
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	apps, _ := raw["apps"].(map[string]any)
	web, _ := apps["web"].(map[string]any)
	if raw["machines_api"] == "" || raw["token"] != testToken || raw["dns"] == "" || web["url"] != s.AppURL("web") {
		t.Fatalf("state JSON = %s", b)
	}
	table := out.String()
	for _, want := range append(machineIDs(s, "web"), "web", s.AppURL("web"), s.State().MachinesAPI, s.State().DNS, s.LogDir()) {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, testToken) {
		t.Error("the table shows the token")
	}
}
