package rollout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/purrfly/purrfly/internal/clock"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"
)

// What launch asks the Machines API about apps, addresses, secrets and new
// machines. Reads are retried like every call; a create is sent once (a
// lost answer may have created it): on failure the caller reads the state
// back, and a re-run creates only what is still missing.

// appExists reports whether the app exists (false on 404; a 403, an app
// another organisation holds or the token cannot reach, is an error whose
// statusOf says so).
func (a *machinesAPI) appExists(ctx context.Context, app string) (bool, error) {
	err := a.call(ctx, "app", app, apiRequestTimeout, func(ctx context.Context) error {
		_, err := a.c.GetApp(ctx, app)
		return err
	})
	if statusOf(err) == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to read app %s: %w", app, err)
	}
	return true, nil
}

func (a *machinesAPI) createApp(ctx context.Context, app, org string) error {
	err := a.once(ctx, "app-create", app, func(ctx context.Context) error {
		_, err := a.c.CreateApp(ctx, flaps.CreateAppRequest{Name: app, Org: org})
		return err
	})
	if err == nil {
		return nil
	}
	if ok, rerr := a.appExists(ctx, app); rerr == nil && ok {
		return nil // the answer was lost, or a concurrent launch made it
	}
	var fe *flaps.FlapsError
	switch {
	case statusOf(err) == http.StatusUnprocessableEntity && (strings.Contains(err.Error(), "taken") ||
		errors.As(err, &fe) && strings.Contains(string(fe.ResponseBody), "name_taken")):
		return configErrorf("app name %s is taken by another organisation (Fly app names are global): "+
			"choose a name of your own for it in fly/rollout.toml (app = \"...\", and the url with it), then run again: %v", app, err)
	case statusOf(err) == http.StatusForbidden || statusOf(err) == http.StatusUnauthorized:
		return tokenScopeError(org, []string{app})
	}
	return fmt.Errorf("failed to create app %s in organisation %s: %w", app, org, err)
}

func (a *machinesAPI) ips(ctx context.Context, app string) ([]flaps.IPAssignment, error) {
	var out []flaps.IPAssignment
	err := a.call(ctx, "ips", app, apiRequestTimeout, func(ctx context.Context) error {
		res, err := a.c.GetIPAssignments(ctx, app)
		if err == nil && res != nil {
			out = res.IPs
		}
		return err
	})
	return out, err
}

// assignIP allocates an address of kind. An app has one of each kind, so
// a failure that may have allocated it (no answer, a timeout, a 5xx) is
// read back before the request is sent again: never two addresses.
func (a *machinesAPI) assignIP(ctx context.Context, app, kind, org string) (*flaps.IPAssignment, error) {
	delay := a.base
	for try := 1; ; try++ {
		var out *flaps.IPAssignment
		err := a.once(ctx, "ip-assign", app, func(ctx context.Context) error {
			var err error
			out, err = a.c.AssignIP(ctx, app, flaps.AssignIPRequest{Type: kind, Organization: org})
			return err
		})
		if err == nil {
			return out, nil
		}
		if !retryable(ctx, err) || try >= a.tries {
			return nil, err
		}
		if ips, lerr := a.ips(ctx, app); lerr == nil {
			for _, ip := range ips {
				if ipKind(ip) == kind {
					return &ip, nil
				}
			}
		}
		if err := clock.Sleep(ctx, a.clock, delay); err != nil {
			return nil, err
		}
		delay = min(delay*2, maxRetryDelay)
	}
}

func (a *machinesAPI) secretNames(ctx context.Context, app string) (map[string]bool, error) {
	out := map[string]bool{}
	err := a.call(ctx, "secrets", app, apiRequestTimeout, func(ctx context.Context) error {
		ss, err := a.c.ListAppSecrets(ctx, app, nil, false)
		for _, s := range ss {
			out[s.Name] = true
		}
		return err
	})
	return out, err
}

// setSecrets is idempotent (same names, same values): it may be retried.
// It answers the app's new secrets version.
func (a *machinesAPI) setSecrets(ctx context.Context, app string, values map[string]*string) (uint64, error) {
	var version uint64
	err := a.call(ctx, "secrets-set", app, apiRequestTimeout, func(ctx context.Context) error {
		res, err := a.c.UpdateAppSecrets(ctx, app, values)
		if err == nil && res != nil {
			version = res.Version
		}
		return err
	})
	return version, err
}

// launch creates a machine. minSecrets, when not 0, is the secrets version
// it must boot with (Fly's secrets store is not read-after-write: a machine
// created right after a secret was set could otherwise start without it).
//
// A create is made idempotent by a key chosen before it is sent: the
// config's MetaCreate metadata. When the answer does not say that nothing
// was made (it was lost, a timeout, a 5xx), the app's machines are looked
// through for that key for up to createLookup (Fly's lists lag a create)
// before the create is sent again; a machine found is the answer. So a
// lost answer never makes a second machine.
func (a *machinesAPI) launch(ctx context.Context, app, region string, cfg *fly.MachineConfig, minSecrets uint64) (*fly.Machine, error) {
	return a.launchWith(ctx, app, region, cfg, minSecrets, false)
}

// launchWith is launch; skip creates the machine stopped (a standby).
func (a *machinesAPI) launchWith(ctx context.Context, app, region string, cfg *fly.MachineConfig, minSecrets uint64, skip bool) (*fly.Machine, error) {
	cfg, err := copyConfig(cfg)
	if err != nil {
		return nil, err
	}
	key := newCreateKey()
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	cfg.Metadata[MetaCreate] = key
	in := fly.LaunchMachineInput{Region: region, Config: cfg, SkipLaunch: skip}
	if minSecrets > 0 {
		in.MinSecretsVersion = &minSecrets
	}
	delay := a.base
	for try := 1; ; try++ {
		var out *fly.Machine
		err := a.once(ctx, "launch", app, func(ctx context.Context) error {
			var err error
			out, err = a.c.Launch(ctx, app, in)
			return err
		})
		if err == nil && out != nil {
			a.created(out.ID)
			return out, nil
		}
		if err == nil {
			err = errors.New("the answer carries no machine")
		}
		if !retryable(ctx, err) {
			return nil, fmt.Errorf("failed to create a machine of %s in %s: %w", app, region, err)
		}
		if statusOf(err) != http.StatusTooManyRequests { // a 429 made nothing
			if m, lerr := a.findCreated(ctx, app, key); lerr != nil {
				return nil, fmt.Errorf("failed to create a machine of %s in %s: %w (and looking for it: %w)", app, region, err, lerr)
			} else if m != nil {
				a.created(m.ID)
				return m, nil
			}
		}
		if try >= a.tries {
			return nil, fmt.Errorf("failed to create a machine of %s in %s: %w", app, region, err)
		}
		if err := clock.Sleep(ctx, a.clock, delay); err != nil {
			return nil, err
		}
		delay = min(delay*2, maxRetryDelay)
	}
}

// createLookup bounds the search for a machine whose create answer was
// lost: Fly's machine lists show a new machine within a second or two
// (flyctl looks once, half a second after a failed create).
const createLookup = 5 * time.Second

// findCreated looks through app's machines, every second for up to
// createLookup, for the one created with key (nil when none shows).
func (a *machinesAPI) findCreated(ctx context.Context, app, key string) (*fly.Machine, error) {
	until := a.now().Add(createLookup)
	for {
		ms, err := a.list(ctx, app)
		if err != nil {
			return nil, err
		}
		for _, m := range live(ms) {
			if meta(m, MetaCreate) == key {
				return m, nil
			}
		}
		if !a.now().Before(until) {
			return nil, nil
		}
		if err := clock.Sleep(ctx, a.clock, time.Second); err != nil {
			return nil, err
		}
	}
}

// newCreateKey is a create's idempotency key (MetaCreate).
func newCreateKey() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// once is one request within the rate limit and a deadline, not retried.
func (a *machinesAPI) once(ctx context.Context, action, key string, fn func(context.Context) error) error {
	if err := a.limit.wait(ctx, action+"/"+key); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, apiRequestTimeout)
	defer cancel()
	return fn(rctx)
}

// ipKind names an assignment as AssignIP's type does.
func ipKind(ip flaps.IPAssignment) string {
	switch {
	case strings.HasPrefix(ip.IP, "fdaa:"):
		return "private_v6"
	case strings.Contains(ip.IP, ":"):
		return "v6"
	case ip.Shared:
		return "shared_v4"
	}
	return "v4"
}

// forbiddenApps explains why the Machines API refused (403) the apps
// names: the organisation's own app list tells a name another
// organisation holds (Fly app names are global) from a token that cannot
// reach them (an app-scoped deploy token reaches one app, and no app
// list). Either way it is a *ConfigError: nothing was touched.
func (r *run) forbiddenApps(ctx context.Context, names []string) error {
	apps, err := r.api.listApps(ctx, r.env.Org)
	if s := statusOf(err); s == http.StatusForbidden || s == http.StatusUnauthorized {
		return tokenScopeError(r.env.Org, names)
	}
	if err != nil {
		return failf(err, "the Machines API refused app(s) %s (403) and the apps of organisation %s could not be listed", strings.Join(names, ", "), r.env.Org)
	}
	ours := map[string]bool{}
	for _, a := range apps {
		ours[a.Name] = true
	}
	var taken, unreachable []string
	for _, n := range names {
		if ours[n] {
			unreachable = append(unreachable, n)
		} else {
			taken = append(taken, n)
		}
	}
	if len(unreachable) > 0 {
		return tokenScopeError(r.env.Org, unreachable)
	}
	return configErrorf("app name(s) %s are taken by another organisation (Fly app names are global: the Machines API answers 403): "+
		"choose names of your own for them in the environment %s (fly/rollout.toml: app = \"...\", and the url with it), then run again; nothing was created",
		strings.Join(taken, ", "), r.env.Name)
}

// tokenScopeError names FLY_API_TOKEN as why apps are out of reach.
func tokenScopeError(org string, apps []string) error {
	return configErrorf("FLY_API_TOKEN cannot reach app(s) %s (the Machines API answers 403): it looks like an app-scoped deploy token "+
		"(fly tokens deploy), which manages one app; launch and rollout manage every app of the environment and need an organisation token: "+
		"fly tokens create org -o %s, then FLY_API_TOKEN=<it>", strings.Join(apps, ", "), org)
}

// listApps lists the organisation's apps.
func (a *machinesAPI) listApps(ctx context.Context, org string) ([]flaps.App, error) {
	var out []flaps.App
	err := a.call(ctx, "apps", org, apiRequestTimeout, func(ctx context.Context) error {
		var err error
		out, err = a.c.ListApps(ctx, flaps.ListAppsRequest{OrgSlug: org})
		return err
	})
	return out, err
}
