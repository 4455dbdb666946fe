package flyconfig

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	fly "github.com/superfly/fly-go"
)

// MaxFileSize bounds a fly.toml read by Load.
const MaxFileSize = 1 << 20

// File is the part of a fly.toml purrfly deploys (see the package comment).
type File struct {
	App           string            `toml:"app"`
	PrimaryRegion string            `toml:"primary_region"`
	KillSignal    string            `toml:"kill_signal"`
	KillTimeout   *Seconds          `toml:"kill_timeout"`
	Build         map[string]any    `toml:"build"`
	Processes     map[string]string `toml:"processes"`
	Env           Env               `toml:"env"`
	Metrics       *Metrics          `toml:"metrics"`
	HTTPService   *HTTPService      `toml:"http_service"`
	Services      []Service         `toml:"services"`
	Checks        map[string]*Check `toml:"checks"`
	VM            []VM              `toml:"vm"`
	Restart       []Restart         `toml:"restart"`
}

// Metrics is [metrics]: where Fly's Prometheus scrapes the machine.
type Metrics struct {
	Port int    `toml:"port"`
	Path string `toml:"path"`
}

// HTTPService is [http_service].
type HTTPService struct {
	InternalPort       int          `toml:"internal_port"`
	ForceHTTPS         bool         `toml:"force_https"`
	AutoStopMachines   any          `toml:"auto_stop_machines"` // bool or "off"|"stop"|"suspend"
	AutoStartMachines  *bool        `toml:"auto_start_machines"`
	MinMachinesRunning *int         `toml:"min_machines_running"`
	Processes          []string     `toml:"processes"`
	Concurrency        *Concurrency `toml:"concurrency"`
	Checks             []*Check     `toml:"checks"`
}

// Service is one [[services]] entry.
type Service struct {
	Protocol           string       `toml:"protocol"`
	InternalPort       int          `toml:"internal_port"`
	Processes          []string     `toml:"processes"`
	Ports              []Port       `toml:"ports"`
	Concurrency        *Concurrency `toml:"concurrency"`
	AutoStopMachines   any          `toml:"auto_stop_machines"`
	AutoStartMachines  *bool        `toml:"auto_start_machines"`
	MinMachinesRunning *int         `toml:"min_machines_running"`
	HTTPChecks         []*Check     `toml:"http_checks"`
	TCPChecks          []*Check     `toml:"tcp_checks"`
}

// Port is one [[services.ports]] entry.
type Port struct {
	Port       int      `toml:"port"`
	Handlers   []string `toml:"handlers"`
	ForceHTTPS bool     `toml:"force_https"`
}

// Concurrency is a service's concurrency table.
type Concurrency struct {
	Type      string `toml:"type"`
	SoftLimit int    `toml:"soft_limit"`
	HardLimit int    `toml:"hard_limit"`
}

// Check is a [checks.NAME] or a service check.
type Check struct {
	Type        string       `toml:"type"`
	Port        int          `toml:"port"`
	Path        string       `toml:"path"`
	Method      string       `toml:"method"`
	Protocol    string       `toml:"protocol"`
	Interval    fly.Duration `toml:"interval"`
	Timeout     fly.Duration `toml:"timeout"`
	GracePeriod fly.Duration `toml:"grace_period"`
}

// VM is one [[vm]] entry.
type VM struct {
	Size     string `toml:"size"`
	Memory   any    `toml:"memory"` // "512mb", "1gb" or megabytes
	MemoryMB int    `toml:"memory_mb"`
	CPUs     int    `toml:"cpus"`
	CPUKind  string `toml:"cpu_kind"`
}

// Restart is one [[restart]] entry.
type Restart struct {
	Policy    string   `toml:"policy"`
	Retries   int      `toml:"retries"`
	Processes []string `toml:"processes"`
}

// Env is [env]: values may be written as strings, numbers or booleans, as
// flyctl accepts; each becomes its string form.
type Env map[string]string

// UnmarshalTOML implements toml.Unmarshaler.
func (e *Env) UnmarshalTOML(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("[env]: want a table, got %T", v)
	}
	out := make(Env, len(m))
	for k, x := range m {
		switch y := x.(type) {
		case string:
			out[k] = y
		case int64, float64, bool:
			out[k] = fmt.Sprint(y)
		default:
			return fmt.Errorf("[env] %s: want a string, number or boolean, got %T", k, x)
		}
	}
	*e = out
	return nil
}

// Seconds is kill_timeout: an integer of seconds or a duration string.
type Seconds struct{ time.Duration }

// UnmarshalTOML implements toml.Unmarshaler.
func (s *Seconds) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		s.Duration = time.Duration(x) * time.Second
	case string:
		d, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("kill_timeout %q: %w", x, err)
		}
		s.Duration = d
	default:
		return fmt.Errorf("kill_timeout: want seconds or a duration string, got %T", v)
	}
	return nil
}

// Load reads and parses a fly.toml.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse parses a fly.toml, refusing keys outside the supported subset and
// checking what MachineConfig needs.
func Parse(b []byte) (*File, error) {
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("fly.toml is %d bytes, more than %d", len(b), MaxFileSize)
	}
	var f File
	md, err := toml.NewDecoder(bytes.NewReader(b)).Decode(&f)
	if err != nil {
		return nil, fmt.Errorf("invalid fly.toml: %w", err)
	}
	var unknown []string
	for _, k := range md.Undecoded() {
		if len(k) > 0 && k[0] == "build" {
			continue // [build] is flyctl's business
		}
		// A table is named once, not once more per key inside it.
		if n := len(unknown); n > 0 && strings.HasPrefix(k.String(), unknown[n-1]+".") {
			continue
		}
		unknown = append(unknown, k.String())
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unsupported fly.toml keys: %s", strings.Join(unknown, ", "))
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

func (f *File) validate() error {
	if len(f.Processes) > 1 {
		return errors.New("[processes]: one process group only (app)")
	}
	for name, cmd := range f.Processes {
		if name != ProcessGroup {
			return fmt.Errorf("[processes]: the group must be named %q, not %q", ProcessGroup, name)
		}
		if len(strings.Fields(cmd)) == 0 {
			return errors.New("[processes]: empty command")
		}
	}
	if f.KillSignal != "" && !slices.Contains(signals, f.KillSignal) {
		return fmt.Errorf("kill_signal %q is not one of %s", f.KillSignal, strings.Join(signals, ", "))
	}
	if f.KillTimeout != nil && (f.KillTimeout.Duration <= 0 || f.KillTimeout.Duration > 300*time.Second) {
		return fmt.Errorf("kill_timeout %s: want 1s to 300s", f.KillTimeout.Duration)
	}
	if len(f.VM) > 1 {
		return errors.New("[[vm]]: one entry only")
	}
	if len(f.Restart) > 1 {
		return errors.New("[[restart]]: one entry only")
	}
	if h := f.HTTPService; h != nil {
		if !validPort(h.InternalPort) {
			return fmt.Errorf("[http_service]: internal_port %d out of range", h.InternalPort)
		}
		if !onlyApp(h.Processes) {
			return fmt.Errorf("[http_service]: processes %q: only %q runs", h.Processes, ProcessGroup)
		}
	}
	for i, s := range f.Services {
		if !onlyApp(s.Processes) {
			return fmt.Errorf("[[services]] %d: processes %q: only %q runs", i, s.Processes, ProcessGroup)
		}
		if s.Protocol != "tcp" && s.Protocol != "udp" {
			return fmt.Errorf("[[services]] %d: protocol %q, want tcp or udp", i, s.Protocol)
		}
		if !validPort(s.InternalPort) {
			return fmt.Errorf("[[services]] %d: internal_port %d out of range", i, s.InternalPort)
		}
		for _, p := range s.Ports {
			if !validPort(p.Port) {
				return fmt.Errorf("[[services]] %d: port %d out of range", i, p.Port)
			}
		}
	}
	_, err := f.MachineConfig("validate")
	return err
}

// onlyApp reports whether a service's processes list names the one group
// (or none, which means every group).
func onlyApp(ps []string) bool { return len(ps) == 0 || slices.Equal(ps, []string{ProcessGroup}) }

func validPort(p int) bool { return p > 0 && p <= 65535 }

// signals are the stop signals the Machines API accepts.
var signals = []string{"SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGTERM"}
