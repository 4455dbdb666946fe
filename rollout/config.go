package rollout

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/purrfly/purrfly/flyconfig"
	"github.com/purrfly/purrfly/wire"
)

// MaxCount bounds an app's machine count in rollout.toml.
const MaxCount = 32

var regionRE = regexp.MustCompile(`^[a-z]{3}$`)

// Defaults of an environment's timeouts (fly/rollout.toml [env.X.timeouts]).
const (
	DefaultDrain      = 60 * time.Second
	DefaultWait       = 3 * time.Minute
	DefaultMinHealthy = 15 * time.Second
	DefaultPhase      = 10 * time.Minute
	DefaultLeaseTTL   = 90 * time.Second
	DefaultLeaseWait  = 30 * time.Second
	DefaultPoll       = time.Second
	DefaultSmoke      = 15 * time.Second
	// DefaultRetireAfter bounds a retiring relay's life: PurrNet games last
	// minutes to an hour, so two hours let every game that started before
	// its replacement end by itself.
	DefaultRetireAfter = 2 * time.Hour
	// DefaultDNS bounds launch's wait for a new app's public name: Fly's
	// own tools wait a minute and warn that it may take minutes.
	DefaultDNS = 5 * time.Minute
	// DefaultMachinesAPI is Fly's Machines API, used when neither
	// FLY_FLAPS_BASE_URL nor the environment's machines_api is set.
	DefaultMachinesAPI = "https://api.machines.dev"
)

// File is fly/rollout.toml: named environments.
type File struct {
	Envs map[string]*Env `toml:"env"`
}

// Env is one deployment target: a balancer app and the relay apps in the
// order they are deployed.
type Env struct {
	// Name is the table key ("prod", "sim"); set by LoadFile.
	Name string `toml:"-"`
	// MachinesAPI, Token and Secret pin the environment to a Machines API
	// and its credentials, ahead of FLY_FLAPS_BASE_URL, FLY_API_TOKEN and
	// SECRET: meant for the local emulator only (its well-known dev values),
	// so a real token is never sent there.
	MachinesAPI string `toml:"machines_api"`
	Token       string `toml:"token"`
	Secret      string `toml:"secret"`
	// AdminKey is the balancer's ADMIN_KEY launch sets when the app has
	// none (ahead of Options.AdminKey; the emulator's only).
	AdminKey string `toml:"admin_key"`
	// Org is the organisation slug launch creates apps in (default
	// "personal").
	Org      string   `toml:"org"`
	Balancer App      `toml:"balancer"`
	Relays   []App    `toml:"relays"`
	Timeouts Timeouts `toml:"timeouts"`
	// RelayConfig is the fly.toml every relay app is built from (see
	// App.Config), relative to Dir. Empty, and no app naming a config of its
	// own: rollout keeps each machine's config and changes only its image.
	RelayConfig string `toml:"relay_config"`
	// RelayEnv is added to every relay app's [env], over the template's
	// and the values derived from the app's URL, under the app's own env.
	RelayEnv map[string]string `toml:"relay_env"`
	// PortBase is, for an emulator's environment, the port base its ports
	// are written for (`purrctl sim`'s; fly/sim.toml's port_base): with
	// PURRFLY_SIM_PORT_BASE (or --sim-port-base) they move to another
	// (MovePorts), following a `purrctl sim --port-base`.
	PortBase int `toml:"port_base"`
	// Dir is where the file came from: config paths are relative to it.
	// Set by LoadFile; a caller building an Env sets it itself.
	Dir string `toml:"-"`
}

// App is a Fly app and its public URL (https://<app>.fly.dev on Fly), with
// what its machines run when the environment manages configs.
type App struct {
	Name string `toml:"app"`
	URL  string `toml:"url"`
	// Config is the app's fly.toml (relative to Env.Dir); a relay app
	// without one uses Env.RelayConfig. Its [env] gets, for a relay,
	// BALANCER_URL (the balancer's url), HOST_DOMAIN (Domain),
	// HOST_SSL, HOST_WS_PORT and HOST_ENDPOINT (from URL), then
	// Env.RelayEnv, then Env below; app and primary_region become Name and
	// Region.
	Config string `toml:"config"`
	// Region is the app's primary region, where launch creates its
	// machines (default the toml's primary_region).
	Region string `toml:"region"`
	// Count is how many machines launch keeps in Region (default 1; the
	// balancer runs exactly one).
	Count int `toml:"count"`
	// Domain is HOST_DOMAIN, what clients connect to (default the URL's
	// host).
	Domain string `toml:"domain"`
	// Env is added last to the app's [env].
	Env map[string]string `toml:"env"`

	// file is Config as built by Env.Validate; nil when unmanaged.
	file *flyconfig.File
}

// Timeouts bound every wait of a rollout.
type Timeouts struct {
	// Drain is how long a drained relay's rooms may take to empty before
	// its update interrupts them.
	Drain Duration `toml:"drain"`
	// Wait bounds waiting for "started" at the new version and for the new
	// boot to answer /ping, and the registration of exact relay boots.
	Wait Duration `toml:"wait"`
	// MinHealthy is how long a new boot must keep answering /ping with the
	// same boot id (and pass its checks) before the next machine.
	MinHealthy Duration `toml:"min_healthy"`
	// Phase bounds one machine's whole step, the registration and the
	// smoke test.
	Phase Duration `toml:"phase"`
	// LeaseTTL is the machine lease's time to live (refreshed every third).
	LeaseTTL Duration `toml:"lease_ttl"`
	// LeaseWait is how long a lease held by someone else is waited for.
	LeaseWait Duration `toml:"lease_wait"`
	// Poll is the interval of /ping and admin API polling.
	Poll Duration `toml:"poll"`
	// Smoke bounds each smoke step.
	Smoke Duration `toml:"smoke"`
	// RetireAfter bounds a relay retired by an overlap rollout: what still
	// plays then is closed with 1012 (as a drain does at its deadline) and
	// reported, and the machine stops.
	RetireAfter Duration `toml:"retire_after"`
	// DNS bounds launch's wait for the public name of an app it just gave
	// its first address to resolve and answer.
	DNS Duration `toml:"dns"`
}

// Duration is a TOML duration string ("90s", "3m").
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("failed to parse duration %q: %w", b, err)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// LoadFile reads and validates fly/rollout.toml.
func LoadFile(path string) (*File, error) {
	var f File
	md, err := toml.DecodeFile(path, &f)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("failed to read %s: unknown keys %s", path, strings.Join(keys, ", "))
	}
	if len(f.Envs) == 0 {
		return nil, fmt.Errorf("failed to read %s: no [env.NAME] table", path)
	}
	for name, e := range f.Envs {
		if e == nil {
			return nil, fmt.Errorf("failed to read %s: env %q is empty", path, name)
		}
		e.Name, e.Dir = name, filepath.Dir(path)
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("failed to read %s: env %s: %w", path, name, err)
		}
	}
	return &f, nil
}

// Env returns the named environment.
func (f *File) Env(name string) (*Env, error) {
	if e, ok := f.Envs[name]; ok {
		return e, nil
	}
	names := make([]string, 0, len(f.Envs))
	for n := range f.Envs {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("unknown environment %q (known: %s)", name, strings.Join(names, ", "))
}

// Validate fills default timeouts and reports the first problem.
func (e *Env) Validate() error {
	if err := e.Balancer.validate("balancer"); err != nil {
		return err
	}
	if e.Balancer.Count > 1 {
		return errors.New("balancer: count must be 1 (it keeps its state in memory: one machine)")
	}
	if err := e.buildConfig(&e.Balancer, e.Balancer.Config, nil); err != nil {
		return fmt.Errorf("balancer (%s): %w", e.Balancer.Name, err)
	}
	if len(e.Relays) == 0 {
		return errors.New("no relays")
	}
	seen := map[string]bool{e.Balancer.Name: true}
	for i := range e.Relays {
		r := &e.Relays[i]
		if err := r.validate(fmt.Sprintf("relays[%d]", i)); err != nil {
			return err
		}
		if seen[r.Name] {
			return fmt.Errorf("app %s appears twice", r.Name)
		}
		seen[r.Name] = true
		path := firstNonEmpty(r.Config, e.RelayConfig)
		if err := e.buildConfig(r, path, e.relayEnv(r)); err != nil {
			return fmt.Errorf("relays[%d] (%s): %w", i, r.Name, err)
		}
	}
	if e.Org == "" {
		e.Org = "personal"
	}
	if e.PortBase != 0 && (e.PortBase < 1024 || e.PortBase > 65535-PortSpan) {
		return fmt.Errorf("port_base %d out of range (1024 to %d)", e.PortBase, 65535-PortSpan)
	}
	if e.MachinesAPI != "" {
		if err := checkURL(e.MachinesAPI); err != nil {
			return fmt.Errorf("machines_api: %w", err)
		}
	}
	t := &e.Timeouts
	for _, d := range []struct {
		v   *Duration
		def time.Duration
	}{
		{&t.Drain, DefaultDrain}, {&t.Wait, DefaultWait}, {&t.MinHealthy, DefaultMinHealthy},
		{&t.Phase, DefaultPhase}, {&t.LeaseTTL, DefaultLeaseTTL}, {&t.LeaseWait, DefaultLeaseWait},
		{&t.Poll, DefaultPoll}, {&t.Smoke, DefaultSmoke}, {&t.RetireAfter, DefaultRetireAfter}, {&t.DNS, DefaultDNS},
	} {
		if d.v.Duration < 0 {
			return errors.New("timeouts must not be negative")
		}
		if d.v.Duration == 0 {
			d.v.Duration = d.def
		}
	}
	if t.RetireAfter.Duration > wire.MaxRetireAfter {
		return fmt.Errorf("retire_after must be at most %s", wire.MaxRetireAfter)
	}
	if t.LeaseTTL.Duration < 3*time.Second {
		return errors.New("lease_ttl must be at least 3s (it is refreshed every third, in whole seconds)")
	}
	return nil
}

func (a App) validate(what string) error {
	if a.Name == "" {
		return fmt.Errorf("%s: app name missing", what)
	}
	if a.Count < 0 || a.Count > MaxCount {
		return fmt.Errorf("%s (%s): count %d out of range 1..%d", what, a.Name, a.Count, MaxCount)
	}
	if a.Region != "" && !regionRE.MatchString(a.Region) {
		return fmt.Errorf("%s (%s): region %q is not a Fly region code", what, a.Name, a.Region)
	}
	if err := checkURL(a.URL); err != nil {
		return fmt.Errorf("%s (%s): url: %w", what, a.Name, err)
	}
	return nil
}

func checkURL(s string) error {
	if _, ok := wire.ParseHTTPURL(s); !ok {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}
