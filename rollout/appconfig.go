package rollout

import (
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"strings"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/flyconfig"
)

// buildConfig loads path (relative to e.Dir) into a.file with the app's
// name, region and env; derived is the env the environment gives the app
// (a relay's, from its URL), applied over the toml's. An empty path leaves
// the app unmanaged.
func (e *Env) buildConfig(a *App, path string, derived map[string]string) error {
	a.file = nil
	if path == "" {
		return nil
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.Dir, path)
	}
	f, err := flyconfig.Load(path)
	if err != nil {
		return err
	}
	f.App = a.Name
	if a.Region != "" {
		f.PrimaryRegion = a.Region
	}
	if f.PrimaryRegion == "" {
		return fmt.Errorf("%s: no primary_region, and the app names no region", path)
	}
	env := maps.Clone(f.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, derived)
	maps.Copy(env, a.Env)
	for k := range env {
		if flyconfig.Sensitive(k) {
			return fmt.Errorf("env %s looks like a credential: it belongs in the app's secrets (fly secrets set; launch sets SECRET), not in a toml", k)
		}
	}
	f.Env = env
	if _, err := f.MachineConfig("check"); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	a.file = f
	return nil
}

// relayEnv is what a relay's env gets from the environment: where the
// balancer is and how clients reach this app (its URL), then RelayEnv.
func (e *Env) relayEnv(a *App) map[string]string {
	u, _ := url.Parse(a.URL)
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	host := a.Domain
	if host == "" {
		host = u.Hostname()
		if strings.Contains(host, ":") {
			host = "[" + host + "]" // an IPv6 literal, as clients put it in ws://host:port
		}
	}
	env := map[string]string{
		"BALANCER_URL":  e.Balancer.URL,
		"HOST_DOMAIN":   host,
		"HOST_SSL":      fmt.Sprint(u.Scheme == "https"),
		"HOST_WS_PORT":  port,
		"HOST_ENDPOINT": a.URL,
	}
	maps.Copy(env, e.RelayEnv)
	return env
}

// Managed reports whether the app's machines get their config from a
// fly.toml (else a rollout changes only their image).
func (a *App) Managed() bool { return a.file != nil }

// region is where launch creates the app's machines.
func (a *App) region() string {
	if a.file != nil {
		return a.file.PrimaryRegion
	}
	return a.Region
}

// count is how many machines launch keeps.
func (a *App) count() int { return max(a.Count, 1) }

// MachineConfig is the config the app's machines should run on image, as
// built from its fly.toml; nil for an unmanaged app.
func (a *App) MachineConfig(image string) *fly.MachineConfig {
	if a.file == nil {
		return nil
	}
	c, err := a.file.MachineConfig(image)
	if err != nil {
		panic(fmt.Sprintf("rollout: config of %s stopped building after validation: %v", a.Name, err)) // checked in buildConfig
	}
	return c
}

// servesUDP reports whether the app's config has a UDP service (it then
// needs a dedicated IPv4: Fly carries UDP on no other address).
func (a *App) servesUDP() bool {
	if a.file == nil {
		return false
	}
	for _, s := range a.file.Services {
		if s.Protocol == "udp" {
			return true
		}
	}
	return false
}

// MachineConfigs is the config each managed app's machines should run on
// image, by app name: what `purrctl sim` seeds the emulator's machines
// with, so that a first dry run against it shows only what was edited.
func (e *Env) MachineConfigs(image string) map[string]*fly.MachineConfig {
	out := map[string]*fly.MachineConfig{}
	apps := []*App{&e.Balancer}
	for i := range e.Relays {
		apps = append(apps, &e.Relays[i])
	}
	for _, a := range apps {
		if c := a.MachineConfig(image); c != nil {
			out[a.Name] = c
		}
	}
	return out
}
