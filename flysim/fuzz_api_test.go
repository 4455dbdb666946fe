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
