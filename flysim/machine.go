package flysim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"time"

	fly "github.com/superfly/fly-go"
)

// Machine states (Fly's names).
const (
	StateCreated   = "created"
	StateStarting  = "starting"
	StateStarted   = "started"
	StateStopping  = "stopping"
	StateStopped   = "stopped"
	StateDestroyed = "destroyed"
	// Transient and failure states a platform with MidUpdateStates shows.
	StateReplacing = "replacing" // an update's old process stopping
	StateFailed    = "failed"    // its process could not be started
)

// maxEvents bounds a machine's event list (newest first, as Fly lists them).
const maxEvents = 30

// app is one emulated app. cfg is static after New; every other field but
// proxy and udp is guarded by Sim.mu.
type app struct {
	cfg      *AppConfig
	machines map[string]*machine
	order    []*machine      // creation order, destroyed ones included
	changed  chan struct{}   // closed and replaced on every change of its machines or IPs
	proxy    *proxy          // set in Start, static afterwards
	udp      []*udpForwarder // one per cfg.UDP entry, set in Start, static afterwards

	// created is false for a reserved app until POST /v1/apps creates it;
	// until then the API, DNS and Fly-Replay know no such app.
	created   bool
	createdAt time.Time
	// secrets by name, and the version every change bumps (secrets.go).
	secrets        map[string]*appSecret
	secretsVersion uint64
	// ips are the app's public addresses, in assignment order (api_ips.go).
	ips []*ipAssignment
}

// touchLocked wakes whoever follows the app's machines (the UDP forwarders).
func (a *app) touchLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// machine is one emulated machine. Its process is owned by its run goroutine
// (lifecycle.go); API handlers change its record under Sim.mu and hand the
// process work to that goroutine through ops.
type machine struct {
	// Static after creation.
	app       *app
	id        string
	ip        string
	createdAt time.Time
	ops       chan op
	// byAPI: created through the Machines API, not from the config, so
	// the platform's eventual consistency applies (ListLag, CreateNotFound).
	byAPI bool
	// host is where it lives (host.go); it never moves.
	host string

	// Guarded by Sim.mu.
	name       string
	region     string
	state      string
	version    string
	instanceID string
	config     *fly.MachineConfig
	cordoned   bool
	events     []*fly.MachineEvent
	checks     map[string]*fly.MachineCheckStatus
	lease      *lease
	updatedAt  time.Time
	pid        int           // of the running process, 0 when none
	hostDown   bool          // its host failed (host.go)
	changed    chan struct{} // closed and replaced on every change (waiters)
}

// touchLocked records a change: new updated_at, waiters woken.
func (m *machine) touchLocked(now time.Time) {
	m.updatedAt = now
	close(m.changed)
	m.changed = make(chan struct{})
	m.app.touchLocked()
}

func (m *machine) setStateLocked(state string, now time.Time) {
	m.state = state
	m.touchLocked(now)
}

func (m *machine) eventLocked(now time.Time, typ, status, source string, req *fly.MachineRequest) {
	ev := &fly.MachineEvent{Type: typ, Status: status, Source: source, Timestamp: now.UnixMilli(), Request: req}
	m.events = append([]*fly.MachineEvent{ev}, m.events...)
	if len(m.events) > maxEvents {
		m.events = m.events[:maxEvents]
	}
	m.touchLocked(now)
}

// routableLocked reports whether the proxy of platform p may balance onto
// m: started, not cordoned, every check that routes passing (p's
// ProxyChecks: service checks only, or every check).
func (m *machine) routableLocked(p *Platform) bool {
	if m.state != StateStarted || m.cordoned || m.hostDown {
		return false
	}
	for name, c := range m.checks {
		if _, topLevel := m.config.Checks[name]; topLevel && p.ProxyChecks == ProxyChecksService {
			continue // top-level checks observe; they do not route
		}
		if c.Status != fly.Passing {
			return false
		}
	}
	return true
}

// listedLocked reports whether a machine list at now shows m yet
// (Platform.ListLag).
func (m *machine) listedLocked(p *Platform, now time.Time) bool {
	return !m.byAPI || !now.Before(m.createdAt.Add(p.ListLag.Duration))
}

// knownLocked reports whether a call naming m at now finds it yet
// (Platform.CreateNotFound).
func (m *machine) knownLocked(p *Platform, now time.Time) bool {
	return !m.byAPI || !now.Before(m.createdAt.Add(p.CreateNotFound.Duration))
}

// healthyLocked reports whether m is started and every one of its checks
// passes.
func (m *machine) healthyLocked() bool {
	return m.routableLocked(&Platform{ProxyChecks: ProxyChecksAll})
}

// internalPortLocked is where the proxy reaches m: the internal_port of the
// config's first service with an http handler (or the first TCP service),
// else the app's internal_port.
func (m *machine) internalPortLocked() int {
	if m.config != nil {
		for _, sv := range m.config.Services {
			for _, p := range sv.Ports {
				for _, h := range p.Handlers {
					if h == "http" && sv.InternalPort > 0 {
						return sv.InternalPort
					}
				}
			}
		}
		for _, sv := range m.config.Services {
			if !isUDP(sv) && sv.InternalPort > 0 {
				return sv.InternalPort
			}
		}
	}
	return m.app.cfg.InternalPort
}

// servesUDPLocked reports whether m's config has a UDP service on port (on
// Fly a machine gets a service's traffic only if its config has the service).
func (m *machine) servesUDPLocked(port int) bool {
	if m.config == nil {
		return false
	}
	for _, sv := range m.config.Services {
		if isUDP(sv) && sv.InternalPort == port {
			return true
		}
	}
	return false
}

// udpPortsLocked are the internal ports of m's UDP services.
func (m *machine) udpPortsLocked() []int {
	var out []int
	if m.config != nil {
		for _, sv := range m.config.Services {
			if isUDP(sv) && sv.InternalPort > 0 {
				out = append(out, sv.InternalPort)
			}
		}
	}
	return out
}

func isUDP(sv fly.MachineService) bool { return strings.EqualFold(sv.Protocol, "udp") }

// viewLocked renders m as the Machines API of platform p does.
func (m *machine) viewLocked(img *Image, p *Platform) *fly.Machine {
	version := m.version
	switch p.MachineVersion {
	case MachineVersionAbsent:
		version = ""
	case MachineVersionInstanceID:
		version = m.instanceID
	}
	out := &fly.Machine{
		ID:         m.id,
		Name:       m.name,
		State:      m.state,
		Region:     m.region,
		InstanceID: m.instanceID,
		Version:    version,
		PrivateIP:  m.ip,
		CreatedAt:  m.createdAt.UTC().Format(time.RFC3339),
		UpdatedAt:  m.updatedAt.UTC().Format(time.RFC3339),
		Config:     copyConfig(m.config),
		HostStatus: fly.HostStatusOk,
	}
	if m.hostDown {
		out.HostStatus = fly.HostStatusUnreachable
	}
	if m.config != nil {
		out.ImageRef = imageRef(m.config.Image, img)
	}
	out.Events = make([]*fly.MachineEvent, len(m.events))
	for i, e := range m.events {
		c := *e
		out.Events[i] = &c
	}
	names := make([]string, 0, len(m.checks))
	for n := range m.checks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := *m.checks[n]
		out.Checks = append(out.Checks, &c)
	}
	return out
}

// copyConfig deep-copies a config through its JSON form (the form the API
// stores and serves, so nothing is lost that a client could see).
func copyConfig(c *fly.MachineConfig) *fly.MachineConfig {
	if c == nil {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	var out fly.MachineConfig
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return &out
}

// imageRef splits an image reference into Fly's image_ref fields. The digest
// is derived from the reference and the image's command so two images that
// run different things never share one.
func imageRef(name string, img *Image) fly.MachineImageRef {
	ref := name
	if img != nil && img.Ref != "" {
		ref = img.Ref
	}
	registry, rest := DefaultRegistry, ref
	if i := strings.IndexByte(ref, '/'); i > 0 && strings.ContainsAny(ref[:i], ".:") {
		registry, rest = ref[:i], ref[i+1:]
	}
	repo, tag := rest, "latest"
	if i := strings.LastIndexByte(rest, ':'); i > 0 {
		repo, tag = rest[:i], rest[i+1:]
	}
	h := sha256.New()
	h.Write([]byte(ref))
	if img != nil {
		h.Write([]byte(strings.Join(img.Command, "\x00")))
	}
	return fly.MachineImageRef{
		Registry:   registry,
		Repository: repo,
		Tag:        tag,
		Digest:     "sha256:" + hex.EncodeToString(h.Sum(nil)),
	}
}

// imageRefString is FLY_IMAGE_REF.
func imageRefString(name string, img *Image) string {
	r := imageRef(name, img)
	return r.Registry + "/" + r.Repository + ":" + r.Tag
}

// initialConfig builds the config of a machine the TOML declares, the way
// flyctl would from fly.toml: env, one http service on internal_port, one
// udp service per [[apps.udp]] (port = internal_port, as Fly requires; the
// Sim's public port is its own business, as the proxy's is for 80/443),
// checks copied from [checks], stop_config from kill_signal/kill_timeout.
func initialConfig(a *AppConfig, spec *MachineSpec) *fly.MachineConfig {
	if a.Seed != nil {
		return seededConfig(a, spec)
	}
	env := map[string]string{}
	for k, v := range a.Env {
		env[k] = v
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	sig := a.KillSignal
	port80, port443 := 80, 443
	cfg := &fly.MachineConfig{
		Image: spec.Image,
		Env:   env,
		Init:  fly.MachineInit{Cmd: append([]string(nil), a.Cmd...)},
		Metadata: map[string]string{
			fly.MachineConfigMetadataKeyFlyPlatformVersion: fly.MachineFlyPlatformVersion2,
			fly.MachineConfigMetadataKeyFlyProcessGroup:    DefaultProcessGroup,
		},
		Guest: &fly.MachineGuest{CPUKind: "shared", CPUs: 1, MemoryMB: DefaultMemoryMB},
		Services: []fly.MachineService{{
			Protocol:     "tcp",
			InternalPort: a.InternalPort,
			Ports: []fly.MachinePort{
				{Port: &port80, Handlers: []string{"http"}},
				{Port: &port443, Handlers: []string{"tls", "http"}},
			},
			Checks: serviceChecksToFly(a.ServiceChecks),
		}},
		StopConfig: &fly.StopConfig{Signal: &sig, Timeout: &fly.Duration{Duration: a.KillTimeout.Duration}},
	}
	for _, u := range a.UDP {
		port := u.InternalPort
		cfg.Services = append(cfg.Services, fly.MachineService{
			Protocol:     "udp",
			InternalPort: u.InternalPort,
			Ports:        []fly.MachinePort{{Port: &port}},
		})
	}
	if a.RestartPolicy != "" {
		cfg.Restart = &fly.MachineRestart{Policy: fly.MachineRestartPolicy(a.RestartPolicy), MaxRetries: a.RestartMaxRetries}
	}
	if len(a.Checks) > 0 {
		cfg.Checks = map[string]fly.MachineCheck{}
		for name, c := range a.Checks {
			cfg.Checks[name] = checkToFly(c)
		}
	}
	return cfg
}

// seededConfig is a.Seed on the machine's image, with the env keys of the
// app's table and of the machine that the seed lacks, and the platform's
// metadata.
func seededConfig(a *AppConfig, spec *MachineSpec) *fly.MachineConfig {
	cfg := copyConfig(a.Seed)
	cfg.Image = spec.Image
	if cfg.Env == nil {
		cfg.Env = map[string]string{}
	}
	for _, env := range []map[string]string{spec.Env, a.Env} {
		for k, v := range env {
			if _, ok := cfg.Env[k]; !ok {
				cfg.Env[k] = v
			}
		}
	}
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	cfg.Metadata[fly.MachineConfigMetadataKeyFlyPlatformVersion] = fly.MachineFlyPlatformVersion2
	if cfg.Metadata[fly.MachineConfigMetadataKeyFlyProcessGroup] == "" {
		cfg.Metadata[fly.MachineConfigMetadataKeyFlyProcessGroup] = DefaultProcessGroup
	}
	return cfg
}

func serviceChecksToFly(cs []*CheckConfig) []fly.MachineServiceCheck {
	var out []fly.MachineServiceCheck
	for _, c := range cs {
		mc := checkToFly(c)
		out = append(out, fly.MachineServiceCheck{Type: mc.Type, Port: mc.Port, Interval: mc.Interval, Timeout: mc.Timeout,
			GracePeriod: mc.GracePeriod, HTTPMethod: mc.HTTPMethod, HTTPPath: mc.HTTPPath})
	}
	return out
}

func checkToFly(c *CheckConfig) fly.MachineCheck {
	typ, port := c.Type, c.Port
	mc := fly.MachineCheck{
		Type:     &typ,
		Port:     &port,
		Interval: &fly.Duration{Duration: c.Interval.Duration},
		Timeout:  &fly.Duration{Duration: c.Timeout.Duration},
	}
	if c.GracePeriod.Duration > 0 {
		mc.GracePeriod = &fly.Duration{Duration: c.GracePeriod.Duration}
	}
	if c.Type == "http" {
		method, path := c.Method, c.Path
		mc.HTTPMethod, mc.HTTPPath = &method, &path
	}
	return mc
}
