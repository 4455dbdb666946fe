package flysim

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"
)

// FuzzLoadConfig: sim.toml (fly/sim.toml and the tests' configs), which
// takes fly.toml's shapes. The file is one of a few real configs (or
// nothing) followed by the fuzzed bytes, which TOML lets add keys and
// tables, so the inputs stay small. Whatever the file holds, LoadConfig
// answers an error or a config whose every app, check and machine obeys
// the documented bounds; validating it again changes nothing.
func FuzzLoadConfig(f *testing.F) {
	bases := [][]byte{nil, []byte("[images.\"a:v1\"]\ncommand = [\"{exe}\"]\n[[apps]]\nname = \"web\"\ninternal_port = 8080\n")}
	for _, p := range []string{"testdata/sim.toml", "../fly/sim.toml"} {
		if b, err := os.ReadFile(p); err == nil {
			bases = append(bases, b)
		}
	}
	f.Add(uint8(1), []byte("kill_timeout = 5\n[apps.checks.c]\ninterval = 1.5\n[[apps.machines]]\nimage = \"a:v1\"\n"))
	f.Add(uint8(1), []byte("kill_timeout = \"300s\"\nkill_signal = \"sigkill\"\n"))
	f.Add(uint8(1), []byte("kill_timeout = 18446744074\n"))
	f.Add(uint8(1), []byte("[[apps.udp]]\ninternal_port = 7777\nport = 7777\n"))
	f.Add(uint8(1), []byte("[[apps]]\nname = \"web\"\ninternal_port = 1\n"))
	f.Add(uint8(2), []byte("[[apps.machines]]\nid = \"148e21dad76789\"\nimage = \"registry.fly.io/purrfly:v1\"\n"))
	f.Add(uint8(3), []byte(""))
	f.Add(uint8(3), []byte("[[apps]]\nname = \"x\"\ninternal_port = 9\n[[apps.udp]]\ninternal_port = 7777\nport = 7777\nproxy = \"127.0.0.1:4301\"\n"))
	f.Add(uint8(0), []byte("token = 1\n"))
	dir := f.TempDir()
	region := regexp.MustCompile(`^[a-z]{3}$`)
	f.Fuzz(func(t *testing.T, which uint8, extra []byte) {
		b := append(append([]byte(nil), bases[int(which)%len(bases)]...), extra...)
		path := filepath.Join(dir, "sim.toml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfig(path)
		if err != nil {
			return
		}
		for _, a := range c.Apps {
			if !region.MatchString(a.PrimaryRegion) || !region.MatchString(a.EdgeRegion) || a.InternalPort < 1 || a.InternalPort > 65535 ||
				a.KillTimeout.Duration <= 0 || a.KillTimeout.Duration > MaxKillTimeout {
				t.Fatalf("app %+v", a)
			}
			if _, err := parseSignal(a.KillSignal); err != nil {
				t.Fatalf("app %s: %v", a.Name, err)
			}
			for name, ch := range a.Checks {
				if ch.Type != "http" && ch.Type != "tcp" || ch.Interval.Duration <= 0 || ch.Timeout.Duration <= 0 || ch.Port == 0 {
					t.Fatalf("check %s %+v", name, ch)
				}
			}
			for _, m := range a.Machines {
				if _, ok := c.lookupImage(m.Image); !ok || !region.MatchString(m.Region) {
					t.Fatalf("machine %+v", m)
				}
			}
		}
		before := *c
		apps := make([]AppConfig, len(c.Apps))
		for i, a := range c.Apps {
			apps[i] = *a
		}
		if err := c.Validate(); err != nil || !reflect.DeepEqual(before, *c) {
			t.Fatalf("validating again: %v", err)
		}
		for i, a := range c.Apps {
			if !reflect.DeepEqual(apps[i], *a) {
				t.Fatalf("validating again changed app %s", a.Name)
			}
		}
	})
}

// FuzzDuration: a TOML duration of sim.toml (kill_timeout, a check's
// interval and timeout), an integer or a float of seconds or a Go duration
// string. What it accepts is the value written: an integer n is exactly n
// seconds and a float x within a nanosecond per second of it, never an
// overflow into another duration.
func FuzzDuration(f *testing.F) {
	f.Add(int64(5), 1.5, "5s")
	f.Add(int64(0), 0.0, "")
	f.Add(int64(18446744074), 1e300, "300000000h")
	f.Add(int64(-1), math.Inf(1), "1.5m")
	f.Fuzz(func(t *testing.T, n int64, x float64, s string) {
		var d Duration
		if d.UnmarshalTOML(n) == nil && (d.Duration%time.Second != 0 || int64(d.Duration/time.Second) != n) {
			t.Fatalf("%d read as %v", n, d.Duration)
		}
		if d.UnmarshalTOML(x) == nil && (math.IsNaN(x) || math.Abs(float64(d.Duration)-x*float64(time.Second)) > math.Max(1, math.Abs(x))) {
			t.Fatalf("%v read as %v", x, d.Duration)
		}
		want, werr := time.ParseDuration(s)
		if err := d.UnmarshalTOML(s); (err == nil) != (werr == nil) || err == nil && d.Duration != want {
			t.Fatalf("%q read as %v, %v", s, d.Duration, err)
		}
	})
}
