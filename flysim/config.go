package flysim

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
	fly "github.com/superfly/fly-go"
)

// Defaults of the emulated organisation.
const (
	DefaultToken         = "flysim-token"
	DefaultRegion        = "ams"
	DefaultKillSignal    = "SIGINT"
	DefaultKillTimeout   = 5 * time.Second
	MaxKillTimeout       = 300 * time.Second
	DefaultCheckInterval = 15 * time.Second
	DefaultCheckTimeout  = 2 * time.Second
	DefaultMachineIPBase = "127.0.0.2"
	DefaultRegistry      = "registry.fly.io"
	DefaultProcessGroup  = "app"
	DefaultMemoryMB      = 256
)

// Config is an emulated organisation: the Machines API and DNS addresses, the
// images (names mapped to command lines) and the apps with their machines.
// LoadConfig reads it from TOML; a test may build one in Go and call New.
type Config struct {
	// Token is the bearer token the Machines API requires ("Bearer T" or
	// "FlyV1 T"). Default DefaultToken.
	Token string `toml:"token"`
	// MachinesAPI is the listen address of the Machines API (default
	// 127.0.0.1:0). Clients use State().MachinesAPI as FLY_FLAPS_BASE_URL.
	MachinesAPI string `toml:"machines_api"`
	// DNS is the listen address (UDP and TCP) of the internal DNS server
	// (default 127.0.0.1:0).
	DNS string `toml:"dns"`
	// PortBase is the port base the config's ports are written for (the
	// Machines API's, fly/sim.toml's 4280): MovePorts moves them all to
	// another base. 0: they cannot be moved.
	PortBase int `toml:"port_base"`
	// MachineIPBase is the first loopback address handed to a machine
	// (default 127.0.0.2); later machines get the next free ones.
	MachineIPBase string `toml:"machine_ip_base"`
	// Org is the organisation slug reported by the apps endpoints.
	Org string `toml:"org"`
	// Images maps an image name ("purrfly:v1") to what runs for it.
	Images map[string]*Image `toml:"images"`
	// Apps are the emulated apps, in table order.
	Apps []*AppConfig `toml:"apps"`
	// Links are fault-injectable TCP paths between apps (link.go): a machine
	// given {link:NAME} instead of {url:APP} reaches the target through it.
	Links []*LinkConfig `toml:"links"`
	// HostsPerRegion is how many hosts each region has (host.go; default
	// DefaultHostsPerRegion, at most 64).
	HostsPerRegion int `toml:"hosts_per_region"`
	// Platform is how unkind the emulated Fly is (platform.go); LoadConfig
	// starts from DefaultPlatform, a Config built in Go from a kind one.
	Platform Platform `toml:"platform"`
}

// Image is what a machine on this image runs.
type Image struct {
	// Command is the argv (the image's entrypoint). A machine config's
	// init.cmd is appended to it (the app's cmd: how one image serves several
	// process groups, as fly.toml's [processes] do). init.exec is ignored, so
	// the Machines API can never run a command line the config does not name.
	// Placeholders: {exe} (Options.Executable), {app}, {machine_id},
	// {region}, {ip}, {port}, {image}, {image_ref}, {dns}, {api}, {log_dir}
	// and {url:APP} (that app's public proxy URL); env values take them too.
	Command []string `toml:"command"`
	// Env is added to the environment of every machine on this image.
	Env map[string]string `toml:"env"`
	// Ref is the FLY_IMAGE_REF; default "registry.fly.io/<name>".
	Ref string `toml:"ref"`
}

// AppConfig is one emulated app.
type AppConfig struct {
	Name string `toml:"name"`
	// Seed, when set, is the config the app's declared machines start
	// from instead of the one built from this table (purrctl sim sets it to
	// the config a rollout would deploy, so a first dry run shows only what
	// an operator changed). The machine's image is its own; env keys of the
	// table and the machine that Seed lacks are added. Never read from TOML.
	Seed *fly.MachineConfig `toml:"-"`
	// PrimaryRegion is PRIMARY_REGION and the default region of new machines.
	PrimaryRegion string `toml:"primary_region"`
	// InternalPort is the port every machine of the app binds on its own
	// loopback address (passed as PORT) and the proxy forwards to.
	InternalPort int `toml:"internal_port"`
	// Proxy is the listen address of the app's public proxy (default
	// 127.0.0.1:0).
	Proxy string `toml:"proxy"`
	// EdgeRegion is the region the proxy claims to be in (Fly-Region);
	// default PrimaryRegion.
	EdgeRegion string `toml:"edge_region"`
	// KillSignal and KillTimeout are the default stop_config of the app's
	// machines, as fly.toml's kill_signal and kill_timeout.
	KillSignal  string   `toml:"kill_signal"`
	KillTimeout Duration `toml:"kill_timeout"`
	// Env is the app's [env]: it goes into every machine's config.
	Env map[string]string `toml:"env"`
	// Cmd is the init.cmd of the app's machines, appended to the image's
	// command (fly.toml's [processes] app = "relay").
	Cmd []string `toml:"cmd"`
	// Checks are top-level checks ([checks.NAME] of fly.toml) of every
	// machine of the app: they observe, and route only when the platform
	// routes on every check (Platform.ProxyChecks).
	Checks map[string]*CheckConfig `toml:"checks"`
	// ServiceChecks are the checks of the app's http service
	// ([[http_service.checks]] of fly.toml): the proxy routes on them.
	ServiceChecks []*CheckConfig `toml:"service_checks"`
	// UDP are the app's UDP services ([[services]] protocol = "udp" of
	// fly.toml), each served by one machine at a time (udp.go).
	UDP []*UDPService `toml:"udp"`
	// Machines are created (and started) when the Sim starts.
	Machines []*MachineSpec `toml:"machines"`
	// RestartPolicy is the restart policy of the app's machines ([[restart]]
	// policy of fly.toml: "no", "on-failure" or "always"); empty leaves the
	// config without one, which flysim treats as "no" (restart.go).
	RestartPolicy string `toml:"restart_policy"`
	// RestartMaxRetries is max_retries of an on-failure policy (default
	// DefaultRestartMaxRetries).
	RestartMaxRetries int `toml:"restart_max_retries"`
	// Secrets are the app's secrets (`fly secrets set`), given to every
	// machine's process as environment variables when it is spawned (after
	// the config's env, which they override; Fly's own variables come last).
	// They never appear in a machine config. The Machines API changes them
	// (api_secrets.go); a change reaches a machine on its next start.
	Secrets map[string]string `toml:"secrets"`
	// Reserved holds the app's name, proxy address, regions and UDP public
	// ports for it, but the app does not exist until POST /v1/apps (flaps
	// CreateApp) creates it (config_reserved.go). A reserved app has no
	// machines, env, cmd, checks, secrets or restart policy in the config.
	Reserved bool `toml:"reserved"`
}

// CheckConfig is an HTTP or TCP check.
type CheckConfig struct {
	Type        string   `toml:"type"` // "http" (default) or "tcp"
	Port        int      `toml:"port"` // default the app's internal_port
	Path        string   `toml:"path"` // http only, default "/"
	Method      string   `toml:"method"`
	Interval    Duration `toml:"interval"`
	Timeout     Duration `toml:"timeout"`
	GracePeriod Duration `toml:"grace_period"`
}

// MachineSpec is a machine the Sim creates at start.
type MachineSpec struct {
	// ID is optional (14 hex characters); a random one otherwise.
	ID     string `toml:"id"`
	Name   string `toml:"name"`
	Region string `toml:"region"`
	Image  string `toml:"image"`
	// Env is added to the app's env in this machine's config.
	Env map[string]string `toml:"env"`
	// StandbyFor makes the machine a standby (`fly machine clone
	// --standby-for`): its config's standbys name that machine, an ID given
	// to an earlier machine of the app; it is created and never started,
	// on another host than that machine, until that host fails.
	StandbyFor string `toml:"standby_for"`
}

// Duration is a TOML duration: a string like "5s" or an integer of seconds
// (fly.toml's kill_timeout = 5).
type Duration struct{ time.Duration }

// UnmarshalTOML implements toml.Unmarshaler.
func (d *Duration) UnmarshalTOML(v any) error {
	// Seconds past time.Duration's range used to wrap around:
	// kill_timeout = 18446744074 read as 290ms (FuzzDuration).
	switch x := v.(type) {
	case int64:
		if x > math.MaxInt64/int64(time.Second) || x < math.MinInt64/int64(time.Second) {
			return fmt.Errorf("failed to parse duration: %d seconds is out of range", x)
		}
		d.Duration = time.Duration(x) * time.Second
	case float64:
		ns := x * float64(time.Second)
		if math.IsNaN(ns) || ns >= math.MaxInt64 || ns < math.MinInt64 {
			return fmt.Errorf("failed to parse duration: %v seconds is out of range", x)
		}
		d.Duration = time.Duration(ns)
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("failed to parse duration %q: %w", x, err)
		}
		d.Duration = p
	default:
		return fmt.Errorf("failed to parse duration: unexpected %T", v)
	}
	return nil
}

// LoadConfig reads and validates a TOML config file.
func LoadConfig(path string) (*Config, error) {
	c := Config{Platform: DefaultPlatform()}
	md, err := toml.DecodeFile(path, &c)
	if err != nil {
		return nil, fmt.Errorf("failed to read config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("failed to read config %s: unknown keys %s", path, strings.Join(keys, ", "))
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("failed to validate config %s: %w", path, err)
	}
	return &c, nil
}

var (
	appNameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	regionRE    = regexp.MustCompile(`^[a-z]{3}$`)
	machineIDRE = regexp.MustCompile(`^[0-9a-f]{14}$`)
)

// Validate fills defaults and reports the first problem found.
func (c *Config) Validate() error {
	if c.Token == "" {
		c.Token = DefaultToken
	}
	if c.MachinesAPI == "" {
		c.MachinesAPI = "127.0.0.1:0"
	}
	if c.DNS == "" {
		c.DNS = "127.0.0.1:0"
	}
	if c.MachineIPBase == "" {
		c.MachineIPBase = DefaultMachineIPBase
	}
	if c.Org == "" {
		c.Org = "personal"
	}
	if c.HostsPerRegion == 0 {
		c.HostsPerRegion = DefaultHostsPerRegion
	}
	if c.HostsPerRegion < 1 || c.HostsPerRegion > 64 {
		return fmt.Errorf("hosts_per_region %d out of range (1 to 64)", c.HostsPerRegion)
	}
	if c.PortBase != 0 && (c.PortBase < 1024 || c.PortBase > 65535-PortSpan) {
		return fmt.Errorf("port_base %d out of range (1024 to %d)", c.PortBase, 65535-PortSpan)
	}
	ip, err := netip.ParseAddr(c.MachineIPBase)
	if err != nil || !ip.Is4() || !ip.IsLoopback() {
		return fmt.Errorf("machine_ip_base %q must be an IPv4 loopback address", c.MachineIPBase)
	}
	for _, a := range []string{c.MachinesAPI, c.DNS} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("bad listen address %q: %w", a, err)
		}
	}
	if len(c.Images) == 0 {
		return errors.New("no [images]")
	}
	for name, im := range c.Images {
		if im == nil || len(im.Command) == 0 {
			return fmt.Errorf("image %q has no command", name)
		}
		if im.Ref == "" {
			im.Ref = DefaultRegistry + "/" + name
		}
	}
	seen := map[string]bool{}
	ids := map[string]bool{}
	for _, a := range c.Apps {
		if a == nil || !appNameRE.MatchString(a.Name) {
			return fmt.Errorf("bad app name %q", appName(a))
		}
		if seen[a.Name] {
			return fmt.Errorf("app %q appears twice", a.Name)
		}
		seen[a.Name] = true
		if err := a.validate(c, ids); err != nil {
			return fmt.Errorf("app %s: %w", a.Name, err)
		}
	}
	if err := c.validateLinks(); err != nil {
		return err
	}
	if err := c.Platform.validate(c.Org); err != nil {
		return err
	}
	return c.validateUDPAddrs()
}

func appName(a *AppConfig) string {
	if a == nil {
		return ""
	}
	return a.Name
}

func (a *AppConfig) validate(c *Config, ids map[string]bool) error {
	if err := a.validateReserved(); err != nil {
		return err
	}
	if err := validateSecrets(a.Secrets); err != nil {
		return err
	}
	if a.PrimaryRegion == "" {
		a.PrimaryRegion = DefaultRegion
	}
	if a.EdgeRegion == "" {
		a.EdgeRegion = a.PrimaryRegion
	}
	if !regionRE.MatchString(a.PrimaryRegion) || !regionRE.MatchString(a.EdgeRegion) {
		return fmt.Errorf("regions are three lower-case letters")
	}
	if a.InternalPort <= 0 || a.InternalPort > 65535 {
		return fmt.Errorf("internal_port %d out of range", a.InternalPort)
	}
	if a.Proxy == "" {
		a.Proxy = "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(a.Proxy); err != nil {
		return fmt.Errorf("bad proxy address %q: %w", a.Proxy, err)
	}
	if a.KillSignal == "" {
		a.KillSignal = DefaultKillSignal
	}
	if _, err := parseSignal(a.KillSignal); err != nil {
		return err
	}
	if a.KillTimeout.Duration == 0 {
		a.KillTimeout.Duration = DefaultKillTimeout
	}
	if a.KillTimeout.Duration < 0 || a.KillTimeout.Duration > MaxKillTimeout {
		return fmt.Errorf("kill_timeout %s out of range (max %s)", a.KillTimeout.Duration, MaxKillTimeout)
	}
	for name, ch := range a.Checks {
		if err := a.validateCheck(ch); err != nil {
			return fmt.Errorf("check %q: %w", name, err)
		}
	}
	for i, ch := range a.ServiceChecks {
		if err := a.validateCheck(ch); err != nil {
			return fmt.Errorf("service check %d: %w", i, err)
		}
	}
	if err := a.validateUDP(); err != nil {
		return err
	}
	switch a.RestartPolicy {
	case "", string(fly.MachineRestartPolicyNo), string(fly.MachineRestartPolicyOnFailure), string(fly.MachineRestartPolicyAlways):
	default:
		return fmt.Errorf("restart_policy %q: want no, on-failure or always", a.RestartPolicy)
	}
	if a.RestartMaxRetries < 0 || a.RestartMaxRetries > 100 {
		return fmt.Errorf("restart_max_retries %d out of range (0 to 100)", a.RestartMaxRetries)
	}
	for i, m := range a.Machines {
		if m == nil {
			return fmt.Errorf("machine %d is empty", i)
		}
		if m.Region == "" {
			m.Region = a.PrimaryRegion
		}
		if !regionRE.MatchString(m.Region) {
			return fmt.Errorf("machine %d: bad region %q", i, m.Region)
		}
		if _, ok := c.lookupImage(m.Image); !ok {
			return fmt.Errorf("machine %d: unknown image %q (known: %s)", i, m.Image, strings.Join(c.imageNames(), ", "))
		}
		if m.ID != "" {
			if !machineIDRE.MatchString(m.ID) {
				return fmt.Errorf("machine %d: id %q is not 14 lower-case hex characters", i, m.ID)
			}
			if ids[m.ID] {
				return fmt.Errorf("machine id %s appears twice", m.ID)
			}
			ids[m.ID] = true
		}
		if m.StandbyFor != "" && !slices.ContainsFunc(a.Machines[:i], func(o *MachineSpec) bool { return o != nil && o.ID == m.StandbyFor }) {
			return fmt.Errorf("machine %d: standby_for %q names no earlier machine of the app", i, m.StandbyFor)
		}
	}
	return nil
}

// validateCheck fills a check's defaults and refuses what the Sim cannot
// run.
func (a *AppConfig) validateCheck(ch *CheckConfig) error {
	if ch == nil {
		return errors.New("empty")
	}
	if ch.Type == "" {
		ch.Type = "http"
	}
	if ch.Type != "http" && ch.Type != "tcp" {
		return errors.New("type must be http or tcp")
	}
	if ch.Port == 0 {
		ch.Port = a.InternalPort
	}
	if ch.Type == "http" && ch.Path == "" {
		ch.Path = "/"
	}
	if ch.Method == "" && ch.Type == "http" {
		ch.Method = "GET"
	}
	if ch.Interval.Duration <= 0 {
		ch.Interval.Duration = DefaultCheckInterval
	}
	if ch.Timeout.Duration <= 0 {
		ch.Timeout.Duration = DefaultCheckTimeout
	}
	return nil
}

// lookupImage finds an image by name, with or without the default registry
// prefix (a deploy tool may send "registry.fly.io/purrfly:v2").
func (c *Config) lookupImage(name string) (*Image, bool) {
	if im, ok := c.Images[name]; ok {
		return im, true
	}
	if im, ok := c.Images[strings.TrimPrefix(name, DefaultRegistry+"/")]; ok {
		return im, true
	}
	for _, im := range c.Images {
		if im.Ref == name {
			return im, true
		}
	}
	return nil, false
}

func (c *Config) imageNames() []string {
	names := make([]string, 0, len(c.Images))
	for n := range c.Images {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// parseSignal accepts the names Fly accepts for kill_signal.
func parseSignal(name string) (syscall.Signal, error) {
	s, ok := signals[strings.ToUpper(name)]
	if !ok {
		return 0, fmt.Errorf("unknown kill_signal %q", name)
	}
	return s, nil
}

// executable resolves Options.Executable.
func executable(opt string) (string, error) {
	if opt != "" {
		return opt, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("failed to find the executable: %w", err)
	}
	return exe, nil
}
