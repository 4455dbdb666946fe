package rollout

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// FuzzLoadFile: fly/rollout.toml. The file is the shipped one, a minimal
// environment, or nothing, followed by the fuzzed bytes (TOML lets them
// add keys and tables), so the inputs stay small. Whatever the file
// holds, LoadFile answers a validated File or an error: every environment
// has a balancer and relays with http(s) URLs, distinct app names,
// positive timeouts and a lease_ttl of at least 3 s; and a loaded File,
// written back as TOML, loads again to the same File.
func FuzzLoadFile(f *testing.F) {
	bases := [][]byte{nil, []byte("[env.x]\nbalancer = { app = \"b\", url = \"http://127.0.0.1:1\" }\nrelays = [{ app = \"r\", url = \"https://r.fly.dev\" }]\n")}
	if b, err := os.ReadFile("../fly/rollout.toml"); err == nil {
		bases = append(bases, b)
	}
	f.Add(uint8(2), []byte(""))
	f.Add(uint8(1), []byte(""))
	f.Add(uint8(1), []byte("machines_api = \"http://127.0.0.1:4280\"\ntoken = \"t\"\n[env.x.timeouts]\nlease_ttl = \"2s\"\n"))
	f.Add(uint8(1), []byte("[env.x.timeouts]\npoll = \"-1s\"\n"))
	f.Add(uint8(1), []byte("[env.y]\nbalancer = { app = \"b\", url = \"http://b\" }\nrelays = [{ app = \"b\", url = \"http://b\" }]\n"))
	f.Add(uint8(2), []byte("[env.prod.timeouts]\nsmoke = \"1h\"\n"))
	f.Add(uint8(0), []byte("[env.x]\nunknown = 1\n"))
	f.Add(uint8(0), []byte("[env]\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, which uint8, extra []byte) {
		b := append(append([]byte(nil), bases[int(which)%len(bases)]...), extra...)
		path := filepath.Join(dir, "rollout.toml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := LoadFile(path)
		if err != nil {
			return
		}
		for name, e := range file.Envs {
			if e.Name != name || e.Validate() != nil || e.Timeouts.LeaseTTL.Duration < 3*time.Second {
				t.Fatalf("env %q loaded as %+v", name, e)
			}
			for _, d := range []Duration{e.Timeouts.Drain, e.Timeouts.Wait, e.Timeouts.MinHealthy, e.Timeouts.Phase,
				e.Timeouts.LeaseTTL, e.Timeouts.LeaseWait, e.Timeouts.Poll, e.Timeouts.Smoke} {
				if d.Duration <= 0 {
					t.Fatalf("env %q: timeouts %+v", name, e.Timeouts)
				}
			}
		}
		var out bytes.Buffer
		if err := toml.NewEncoder(&out).Encode(file); err != nil {
			t.Fatalf("encode %+v: %v", file, err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := LoadFile(path)
		if err != nil || !reflect.DeepEqual(again, file) {
			t.Fatalf("%q loaded, written as %q, loaded again as %+v (%v)", b, out.Bytes(), again, err)
		}
	})
}

// FuzzNormalizeRef: image references from the Machines API and the
// command line, compared by sameImageRef. Normalizing is idempotent (so
// sameImageRef is an equivalence), gives registry/repository:tag without
// a digest, and a reference is the same image as its normal form.
func FuzzNormalizeRef(f *testing.F) {
	for _, s := range []string{"purrfly:v2", "registry.fly.io/purrfly:v2", "registry.fly.io/purrfly", "purrfly@sha256:abc",
		"localhost:5000/a/b:c", "docker.io/library/nginx", " purrfly:v1 ", "", "@", "a/b", "a:b/c", "x.y/z:", "purrfly:v2 @sha256:abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := normalizeRef(s)
		if normalizeRef(n) != n || !sameImageRef(s, n) || bytes.ContainsRune([]byte(n), '@') {
			t.Fatalf("normalizeRef(%q) = %q, again %q", s, n, normalizeRef(n))
		}
	})
}
