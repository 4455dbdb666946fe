package rollout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"
)

// Fly metadata an overlap rollout keeps on relay machines, so that a
// re-run started from any point finds everything again (metadata lives in
// the machine's config, which a create sets whole and the metadata routes
// change key by key without restarting it):
//
//   - purrfly_rollout: the rollout that created (or retired) the machine;
//   - purrfly_role: "replacement" on a machine created to replace another
//     until that one retires (then the key goes), "retiring" on a machine
//     retired by a rollout;
//   - purrfly_replaces: on a replacement, the machine it replaces;
//   - purrfly_replaced_by: on a retiring machine, its replacement;
//   - purrfly_retire_by: on a retiring machine, its latest stop (RFC 3339),
//     which a re-run sends again, never later;
//   - purrfly_create: on every machine a rollout or launch created, the key
//     it chose before sending the create, by which it finds the machine
//     when the create's answer was lost.
//
// (purrfly_secrets, the stamp of the app's secrets a machine was deployed
// with, is part of the wanted config instead: secretstamp.go.)
const (
	MetaCreate     = "purrfly_create"
	MetaRollout    = "purrfly_rollout"
	MetaRole       = "purrfly_role"
	MetaReplaces   = "purrfly_replaces"
	MetaReplacedBy = "purrfly_replaced_by"
	MetaRetireBy   = "purrfly_retire_by"

	RoleReplacement = "replacement"
	RoleRetiring    = "retiring"
)

// metaKeys are every key above: a replacement's config, copied from the
// machine it replaces, starts without them.
var metaKeys = []string{MetaRollout, MetaRole, MetaReplaces, MetaReplacedBy, MetaRetireBy, MetaCreate}

// meta reads one metadata key of m ("" when absent).
func meta(m *fly.Machine, key string) string {
	if m == nil || m.Config == nil {
		return ""
	}
	return m.Config.Metadata[key]
}

// retiring reports whether a rollout retired m.
func retiring(m *fly.Machine) bool { return meta(m, MetaRole) == RoleRetiring }

// retireBy is m's latest stop as its metadata says (zero when unknown).
func retireBy(m *fly.Machine) time.Time {
	t, err := time.Parse(time.RFC3339, meta(m, MetaRetireBy))
	if err != nil {
		return time.Time{}
	}
	return t
}

// newRolloutID names one rollout run in the metadata it writes.
func newRolloutID(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// running reports whether m's process is meant to run (started, or on its
// way there: created, starting, or one of the states Fly shows while it
// updates or restarts a machine).
func running(m *fly.Machine) bool {
	switch m.State {
	case "started", "starting", "created", "replacing", "updating", "restarting":
		return true
	}
	return false
}

// setMetadata sets the keys of kv on machine id, one request per key (the
// Machines API changes metadata key by key), each retried like any call.
func (a *machinesAPI) setMetadata(ctx context.Context, app, id string, kv map[string]string) error {
	for _, k := range sortedKeys(kv) {
		err := a.call(ctx, "metadata_set", id, apiRequestTimeout, func(ctx context.Context) error {
			return a.c.SetMetadata(ctx, app, id, k, kv[k])
		})
		if err != nil {
			return fmt.Errorf("failed to set metadata %s of machine %s: %w", k, id, err)
		}
	}
	return nil
}

// deleteMetadata removes keys of machine id (absent ones are no error).
func (a *machinesAPI) deleteMetadata(ctx context.Context, app, id string, keys ...string) error {
	for _, k := range keys {
		err := a.call(ctx, "metadata_delete", id, apiRequestTimeout, func(ctx context.Context) error {
			err := a.c.DeleteMetadata(ctx, app, id, k)
			if statusOf(err) == http.StatusNotFound {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("failed to delete metadata %s of machine %s: %w", k, id, err)
		}
	}
	return nil
}

// destroy destroys machine id (killing its process if it runs): retried
// like any call; a machine already gone is no error.
func (a *machinesAPI) destroy(ctx context.Context, app, id string) error {
	err := a.call(ctx, "destroy", id, apiRequestTimeout, func(ctx context.Context) error {
		err := a.c.Destroy(ctx, app, fly.RemoveMachineInput{ID: id, Kill: true}, "")
		if statusOf(err) == http.StatusNotFound && !a.isFresh(id) {
			return nil // gone (a machine just created may only not be visible yet)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to destroy machine %s: %w", id, err)
	}
	// Gone from the app (and its listing) before the caller goes on.
	err = a.call(ctx, "wait", id, apiRequestTimeout, func(ctx context.Context) error {
		err := a.c.Wait(ctx, app, id, flaps.WithWaitStates("destroyed"), flaps.WithWaitTimeout(20*time.Second))
		if statusOf(err) == http.StatusNotFound {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("machine %s was not destroyed: %w", id, err)
	}
	return nil
}

// stop stops machine id (its process gets its stop signal, then SIGKILL
// after its kill timeout).
func (a *machinesAPI) stop(ctx context.Context, app, id string) error {
	err := a.call(ctx, "stop", id, apiRequestTimeout, func(ctx context.Context) error {
		return a.c.Stop(ctx, app, fly.StopMachineInput{ID: id}, "")
	})
	if err != nil {
		return fmt.Errorf("failed to stop machine %s: %w", id, err)
	}
	return nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
