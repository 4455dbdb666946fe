package flysim

import (
	"fmt"
	"slices"
	"time"

	fly "github.com/superfly/fly-go"
)

// Platform is how Fly treats a deploy tool where a kind emulator would
// not: each field one behaviour of Fly's, each with its own key in
// sim.toml's [platform]. docs/FLYSIM.md names the source of each.
//
// The zero Platform is a kind one: every behaviour off, the Sim answering
// at once and exactly. LoadConfig starts from DefaultPlatform, so a TOML
// config gets Fly's behaviour for every key its [platform] does not set
// (fly/sim.toml shows them all); a test may shorten the delays ("0s"
// turns one off).
type Platform struct {
	// ListLag: a machine created through the Machines API is missing
	// from the app's machine lists for this long (Fly's lists are
	// eventually consistent).
	ListLag Duration `toml:"list_lag"`
	// CreateNotFound: every call naming a machine created through the
	// Machines API (get, wait, lease, start, ...) answers 404 "machine not
	// found" for this long after the create.
	CreateNotFound Duration `toml:"create_not_found"`
	// MachineVersion is what a machine's JSON says of its version:
	// "absent" (Fly's spec: instance_id and no version), "instance_id"
	// (version equal to instance_id) or "distinct" (both, different
	// values; also ""). A wait takes either as ?version= or ?instance_id=.
	MachineVersion string `toml:"machine_version"`
	// DefaultRestart is the restart policy of a machine whose config has
	// none: "on-failure" (up to DefaultRestartMaxRetries restarts), or
	// "no" (also "").
	DefaultRestart string `toml:"default_restart"`
	// ConfigDefaults: the Machines API stores, and answers with, a config
	// whose restart (DefaultRestart) and guest (shared, 1 CPU,
	// DefaultMemoryMB) Fly filled in where the client sent none.
	ConfigDefaults bool `toml:"config_defaults"`
	// ProxyChecks is which checks decide whether the proxy routes to a
	// machine: "service" (its services' checks; top-level [checks] only
	// observe) or "all" (every check; also "").
	ProxyChecks string `toml:"proxy_checks"`
	// ProxyHold: with no machine to route to, the proxy holds a request
	// this long waiting for one to become healthy, then answers 503 (0:
	// 503 at once).
	ProxyHold Duration `toml:"proxy_hold"`
	// RateLimit: the Machines API allows one request a second per action
	// and machine (or app, for app-wide actions), bursts of 3, and get 5
	// a second, bursts of 10; past that it answers 429 with Retry-After.
	RateLimit bool `toml:"rate_limit"`
	// DNSDelay: the public name of an app created through the Machines
	// API resolves only this long after its first public IP is assigned
	// (and not at all before one): until then its proxy takes no
	// connection. Apps the config declares with machines resolve from the
	// start (0: every app resolves at once, IPs or not).
	DNSDelay Duration `toml:"dns_delay"`
	// MidUpdateStates: an update of a running machine shows "replacing"
	// while the old process stops, and a machine whose process cannot be
	// started at all is "failed" (else "stopping" and "stopped").
	MidUpdateStates bool `toml:"mid_update_states"`
	// OtherOrg holds TakenAppNames: to this organisation's tokens, GET of
	// such an app (and every route under it) answers 403 and creating one
	// 422 name_taken, as for a name taken anywhere on Fly. A name of the
	// config's own apps may be listed: it is then someone else's.
	OtherOrg      string   `toml:"other_org"`
	TakenAppNames []string `toml:"taken_app_names"`
	// DeployTokens: every app has, beside the organisation's Token, an
	// app-scoped token (`fly tokens deploy`): "<token>-deploy-<app>",
	// listed in State. It reaches that app's routes only: any other app,
	// the app list and app creation answer 403.
	DeployTokens bool `toml:"deploy_tokens"`
	// HostDNSDrop: the machines of a failed host stay in DNS's started
	// records (vms.<app>.internal, <app>.internal, ...) this long after
	// the failure (host.go).
	HostDNSDrop Duration `toml:"host_dns_drop"`
	// StandbyStart: this long after a host fails, every stopped machine
	// whose config's standbys name one of its machines is started.
	StandbyStart Duration `toml:"standby_start"`
}

// DefaultPlatform is Fly as a deploy tool meets it, the Platform
// LoadConfig starts from.
func DefaultPlatform() Platform {
	return Platform{
		ListLag:         Duration{2 * time.Second},
		CreateNotFound:  Duration{time.Second},
		MachineVersion:  MachineVersionAbsent,
		DefaultRestart:  string(fly.MachineRestartPolicyOnFailure),
		ConfigDefaults:  true,
		ProxyChecks:     ProxyChecksService,
		ProxyHold:       Duration{5 * time.Second},
		RateLimit:       true,
		DNSDelay:        Duration{5 * time.Second},
		MidUpdateStates: true,
		OtherOrg:        "someone-else",
		TakenAppNames:   []string{"purrfly", "relay", "balancer"},
		DeployTokens:    true,
		HostDNSDrop:     Duration{5 * time.Second},
		StandbyStart:    Duration{2 * time.Second},
	}
}

// Values of Platform fields.
const (
	MachineVersionAbsent     = "absent"
	MachineVersionInstanceID = "instance_id"
	MachineVersionDistinct   = "distinct"
	ProxyChecksService       = "service"
	ProxyChecksAll           = "all"
	// maxPlatformDelay bounds every delay of a Platform.
	maxPlatformDelay = 10 * time.Minute
)

func (p *Platform) validate(org string) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"list_lag", p.ListLag.Duration}, {"create_not_found", p.CreateNotFound.Duration},
		{"proxy_hold", p.ProxyHold.Duration}, {"dns_delay", p.DNSDelay.Duration},
		{"host_dns_drop", p.HostDNSDrop.Duration}, {"standby_start", p.StandbyStart.Duration},
	} {
		if d.v < 0 || d.v > maxPlatformDelay {
			return fmt.Errorf("[platform] %s %s out of range (0 to %s)", d.name, d.v, maxPlatformDelay)
		}
	}
	switch p.MachineVersion {
	case "", MachineVersionAbsent, MachineVersionInstanceID, MachineVersionDistinct:
	default:
		return fmt.Errorf("[platform] machine_version %q: want absent, instance_id or distinct", p.MachineVersion)
	}
	switch fly.MachineRestartPolicy(p.DefaultRestart) {
	case "", fly.MachineRestartPolicyNo, fly.MachineRestartPolicyOnFailure:
	default:
		return fmt.Errorf("[platform] default_restart %q: want on-failure or no", p.DefaultRestart)
	}
	switch p.ProxyChecks {
	case "", ProxyChecksService, ProxyChecksAll:
	default:
		return fmt.Errorf("[platform] proxy_checks %q: want service or all", p.ProxyChecks)
	}
	if len(p.TakenAppNames) > 0 {
		if p.OtherOrg == "" || p.OtherOrg == org {
			return fmt.Errorf("[platform] other_org %q must name an organisation other than %q", p.OtherOrg, org)
		}
		if len(p.TakenAppNames) > 1000 {
			return fmt.Errorf("[platform] taken_app_names: at most 1000")
		}
		for _, n := range p.TakenAppNames {
			if !appNameRE.MatchString(n) {
				return fmt.Errorf("[platform] taken_app_names: bad app name %q", n)
			}
		}
	}
	return nil
}

// taken reports whether another organisation holds the app name.
func (p *Platform) taken(name string) bool { return slices.Contains(p.TakenAppNames, name) }

// defaultRestart is the restart policy a config without one gets (nil: none).
func (p *Platform) defaultRestart() *fly.MachineRestart {
	if fly.MachineRestartPolicy(p.DefaultRestart) != fly.MachineRestartPolicyOnFailure {
		return nil
	}
	return &fly.MachineRestart{Policy: fly.MachineRestartPolicyOnFailure, MaxRetries: DefaultRestartMaxRetries}
}

// fillDefaultsLocked completes a config the API stores as Fly does
// (ConfigDefaults): a restart policy and a guest where it has none.
func (p *Platform) fillDefaults(c *fly.MachineConfig) {
	if !p.ConfigDefaults || c == nil {
		return
	}
	if c.Restart == nil {
		c.Restart = p.defaultRestart()
	}
	if c.Guest == nil {
		c.Guest = &fly.MachineGuest{CPUKind: "shared", CPUs: 1, MemoryMB: DefaultMemoryMB}
	}
}

// deployToken is app's app-scoped token (Platform.DeployTokens).
func (c *Config) deployToken(app string) string { return c.Token + "-deploy-" + app }
