package rollout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// pingTimeout bounds one /ping.
const pingTimeout = 5 * time.Second

// machineClient reaches one machine through the app's public URL, with
// fly-force-instance-id so the proxy sends it to that machine and no other.
func machineClient(hc *http.Client, appURL, machineID string) *client.Balancer {
	return (&client.Balancer{BaseURL: appURL, HTTP: hc, Timeout: pingTimeout}).WithHeader(wire.HeaderFlyForceInstance, machineID)
}

// pingMachine reads /ping of one machine through the app's public URL, with
// fly-force-instance-id so the proxy sends it to that machine and no other.
func pingMachine(ctx context.Context, hc *http.Client, appURL, machineID string) (wire.Ping, error) {
	p, _, err := machineClient(hc, appURL, machineID).Ping(ctx, appURL)
	if err != nil {
		return p, err
	}
	if p.BootID == "" {
		return p, errors.New("its /ping answer carries no boot id")
	}
	if p.MachineID != "" && p.MachineID != machineID {
		return p, fmt.Errorf("machine %s answered for %s (fly-force-instance-id not honoured)", p.MachineID, machineID)
	}
	return p, nil
}

// readyMachine asks one relay machine (as pingMachine does) whether it is
// ready: "" when it is (or has no /ready route), else why not in the
// relay's own words.
func readyMachine(ctx context.Context, hc *http.Client, appURL, machineID string) string {
	_, err := machineClient(hc, appURL, machineID).Ready(ctx, appURL)
	var we *wire.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &we) && errors.Is(we, wire.ErrNotReady):
		return we.Message
	case errors.As(err, &we) && we.Status/100 == 4:
		// A relay from before /ready (a rollback to an older image): its
		// registration is checked at the balancer instead.
		return ""
	}
	return "no answer at " + wire.PathReady + ": " + err.Error()
}

// sameImageRef compares image references leniently: a missing registry
// means registry.fly.io, a missing tag :latest, and a digest is ignored.
func sameImageRef(a, b string) bool { return normalizeRef(a) == normalizeRef(b) }

func normalizeRef(s string) string {
	// Trimmed after the digest is cut: "a:v2 @sha256:..." was
	// "registry.fly.io/a:v2 ", not the same image as "a:v2", and
	// normalizing was not idempotent (FuzzNormalizeRef).
	if i := strings.Index(s, "@"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '/'); i <= 0 || !strings.ContainsAny(s[:i], ".:") {
		s = "registry.fly.io/" + s
	}
	if i := strings.LastIndexByte(s, '/'); !strings.Contains(s[i+1:], ":") {
		s += ":latest"
	}
	return s
}

// exitReason says why a machine's process is gone for good since its last
// update: the machine is stopped (or failed, destroyed) and an exit that
// nobody asked for is newer than the update. "" otherwise, including the
// stopping/stopped moments of a replacement (the old process's requested
// exit) and every transitional state.
func exitReason(m *fly.Machine) string {
	switch m.State {
	case "destroyed", "destroying", "failed":
		return "machine is " + m.State
	case "stopped", "suspended":
	default:
		return ""
	}
	for _, ev := range m.Events { // newest first
		if ev.Type == "update" || ev.Type == "launch" {
			break // older events belong to an earlier deploy
		}
		if ev.Type != "exit" || ev.Request == nil || ev.Request.ExitEvent == nil || ev.Request.ExitEvent.RequestedStop {
			continue
		}
		x := ev.Request.ExitEvent
		if x.Signal != 0 {
			return fmt.Sprintf("machine is %s: its process was killed by signal %d", m.State, x.Signal)
		}
		return fmt.Sprintf("machine is %s: its process exited with code %d", m.State, x.ExitCode)
	}
	return ""
}

// crashedSince says why the process of a machine has crashed since its
// last update or launch (and, when since is set, since then): an exit
// nobody asked for, with a failure (a code other than 0, or a signal),
// whether or not its restart policy started it again (Fly's default for
// a config without one is on-failure, up to 10 restarts, so a broken
// image keeps coming back to started with new boots). "" when none did.
func crashedSince(m *fly.Machine, since time.Time) string {
	for _, ev := range m.Events { // newest first
		if ev.Type == "update" || ev.Type == "launch" || !since.IsZero() && ev.Timestamp < since.UnixMilli() {
			break
		}
		if ev.Type != "exit" || ev.Request == nil || ev.Request.ExitEvent == nil || ev.Request.ExitEvent.RequestedStop {
			continue
		}
		x := ev.Request.ExitEvent
		if x.ExitCode == 0 && x.Signal == 0 {
			continue
		}
		how := fmt.Sprintf("exited with code %d", x.ExitCode)
		if x.Signal != 0 {
			how = fmt.Sprintf("was killed by signal %d", x.Signal)
		}
		if !x.Restarting {
			return fmt.Sprintf("its process %s: a boot that crashes is a failed boot", how)
		}
		again := "its restart policy started it again"
		if n := ev.Request.RestartCount; n > 0 {
			again += fmt.Sprintf(" (restart %d)", n)
		}
		return fmt.Sprintf("its process %s and %s: a boot that crashes is a failed boot", how, again)
	}
	return ""
}

// checksPassing reports whether every Fly check of m passes, and the first
// that does not.
func checksPassing(m *fly.Machine) (bool, string) {
	for _, c := range m.Checks {
		if c.Status != fly.Passing {
			// Said as what is awaited: a new machine's checks are
			// critical until their first pass, which is no failure.
			return false, fmt.Sprintf("its Fly check %s has not passed yet (%s)", c.Name, c.Status)
		}
	}
	return true, ""
}
