package rollout

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"
)

// What launch asks the Machines API about apps, addresses, secrets and new
// machines. Reads are retried like every call; a create is sent once (a
// lost answer may have created it): on failure the caller reads the state
// back, and a re-run creates only what is still missing.

// appExists reports whether the app exists (false on 404).
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
	if statusOf(err) == http.StatusUnprocessableEntity && strings.Contains(err.Error(), "taken") {
		return fmt.Errorf("failed to create app %s in organisation %s: %w (Fly app names are global: pick another name in fly/rollout.toml)", app, org, err)
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

func (a *machinesAPI) assignIP(ctx context.Context, app, kind, org string) (*flaps.IPAssignment, error) {
	var out *flaps.IPAssignment
	err := a.once(ctx, "ip-assign", app, func(ctx context.Context) error {
		var err error
		out, err = a.c.AssignIP(ctx, app, flaps.AssignIPRequest{Type: kind, Organization: org})
		return err
	})
	return out, err
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
func (a *machinesAPI) launch(ctx context.Context, app, region string, cfg *fly.MachineConfig, minSecrets uint64) (*fly.Machine, error) {
	in := fly.LaunchMachineInput{Region: region, Config: cfg}
	if minSecrets > 0 {
		in.MinSecretsVersion = &minSecrets
	}
	var out *fly.Machine
	err := a.once(ctx, "launch", app, func(ctx context.Context) error {
		var err error
		out, err = a.c.Launch(ctx, app, in)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create a machine of %s in %s: %w", app, region, err)
	}
	return out, nil
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
