package flysim

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
)

// FuzzMachineConfig: the JSON body of a machine create or update
// (flaps' LaunchMachineInput). launchInput refuses it with an API error or
// answers a config on one of the sim's images with a stop signal Fly
// knows; and the copy the sim stores (copyConfig, through JSON) exists and
// is the same config, so a stored machine never has a nil config.
func FuzzMachineConfig(f *testing.F) {
	sig := "SIGTERM"
	in, _ := json.Marshal(fly.LaunchMachineInput{Region: "ams", Config: &fly.MachineConfig{
		Image: "purrfly:v1", Env: map[string]string{"SECRET": "s"}, Init: fly.MachineInit{Cmd: []string{"relay"}},
		StopConfig: &fly.StopConfig{Signal: &sig, Timeout: &fly.Duration{Duration: 10 * time.Second}},
		Services:   []fly.MachineService{{Protocol: "udp", InternalPort: 7777}},
	}})
	f.Add(in)
	f.Add([]byte(`{"config":{"image":"registry.fly.io/purrfly:v1","metadata":{"fly_process_group":"app"},"guest":{"cpu_kind":"shared","cpus":1,"memory_mb":256}}}`))
	f.Add([]byte(`{"config":{"image":"purrfly:v1","stop_config":{"signal":"SIGWINCH","timeout":"5s"}}}`))
	f.Add([]byte(`{"config":{"image":"nginx"}}`))
	f.Add([]byte(`{"config":{"image":"purrfly:v1","checks":{"c":{"type":"http","interval":"1s","port":8080}}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"min_secrets_version":2,"config":{"image":"purrfly:v1"}}`))
	f.Add([]byte(`{"config":null}`))
	f.Add([]byte(``))
	cfg := &Config{Images: map[string]*Image{"purrfly:v1": {Command: []string{"{exe}"}}}}
	s, err := New(cfg, Options{Executable: "/bin/true", LogDir: f.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	a := &apiServer{s: s}
	ap := &app{cfg: &AppConfig{Name: "x"}, secretsVersion: 1}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/apps/x/machines", bytes.NewReader(body))
		in, err := a.launchInput(r, ap)
		if err != nil {
			if _, ok := err.(*apiError); !ok {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		if v := in.MinSecretsVersion; v != nil && *v > ap.secretsVersion {
			t.Fatalf("accepted min_secrets_version %d past the app's %d", *v, ap.secretsVersion)
		}
		if _, ok := cfg.lookupImage(in.Config.Image); !ok {
			t.Fatalf("accepted image %q", in.Config.Image)
		}
		if sc := in.Config.StopConfig; sc != nil && sc.Signal != nil {
			if _, err := parseSignal(*sc.Signal); err != nil {
				t.Fatalf("accepted signal %q", *sc.Signal)
			}
		}
		c := copyConfig(in.Config)
		if c == nil {
			t.Fatalf("%q: no copy of the config", body)
		}
		want, _ := json.Marshal(in.Config)
		got, _ := json.Marshal(c)
		if !bytes.Equal(got, want) {
			t.Fatalf("copy %s of %s", got, want)
		}
	})
}

// FuzzMetadataChange: a metadata key (from the path) and a body of flaps'
// SetMetadata. The change is refused with a 400 API error, or made: the
// key is the one given and the machine's metadata stays within its bounds.
func FuzzMetadataChange(f *testing.F) {
	f.Add("purrfly_role", []byte(`{"value":"retiring"}`))
	f.Add("fly_process_group", []byte(`{"value":""}`))
	f.Add("bad key", []byte(`{"value":"x"}`))
	f.Add("k", []byte(`{}`))
	f.Add("k", []byte(`{"value":1}`))
	f.Add("k", []byte(`{"value":"`+string(bytes.Repeat([]byte("v"), 5000))+`"}`))
	s, err := New(&Config{Images: map[string]*Image{"purrfly:v1": {Command: []string{"{exe}"}}}},
		Options{Executable: "/bin/true", LogDir: f.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	a := &apiServer{s: s}
	ap := &app{cfg: &AppConfig{Name: "x"}, machines: map[string]*machine{}, changed: make(chan struct{}), created: true}
	m := &machine{app: ap, id: "m1", state: StateStarted, changed: make(chan struct{}),
		config: &fly.MachineConfig{Image: "purrfly:v1", Metadata: map[string]string{"fly_process_group": "app"}}}
	ap.machines["m1"] = m
	s.apps["x"] = ap
	f.Fuzz(func(t *testing.T, key string, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/apps/x/machines/m1/metadata/k", bytes.NewReader(body))
		r.SetPathValue("app", "x")
		r.SetPathValue("id", "m1")
		r.SetPathValue("key", key)
		w := httptest.NewRecorder()
		err := a.setMetadata(w, r)
		s.mu.Lock()
		md := m.config.Metadata
		s.mu.Unlock()
		if verr := validMetadata(md); verr != nil {
			t.Fatalf("metadata out of bounds after %q %q: %v", key, body, verr)
		}
		if err != nil {
			if e, ok := err.(*apiError); !ok || e.status != http.StatusBadRequest {
				t.Fatalf("%q %q: %v", key, body, err)
			}
			return
		}
		if w.Code != http.StatusNoContent || !metadataKeyRE.MatchString(key) {
			t.Fatalf("%q %q: %d", key, body, w.Code)
		}
		if _, ok := md[key]; !ok {
			t.Fatalf("%q set, not in %v", key, md)
		}
		s.mu.Lock()
		m.config.Metadata = map[string]string{"fly_process_group": "app"}
		s.mu.Unlock()
	})
}
