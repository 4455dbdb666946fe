package flysim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	fly "github.com/superfly/fly-go"
)

// StateDestroying is the state between a destroy request and its completion.
const StateDestroying = "destroying"

func decodeBody(r *http.Request, v any) error {
	if r.Body == nil {
		return nil
	}
	err := json.NewDecoder(r.Body).Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errf(http.StatusRequestEntityTooLarge, "request body too large")
	}
	return errf(http.StatusBadRequest, "invalid JSON body: %v", err)
}

// validConfig checks what the Sim needs from a machine config.
func (a *apiServer) validConfig(cfg *fly.MachineConfig) error {
	if cfg == nil {
		return errf(http.StatusBadRequest, "config is required")
	}
	if _, ok := a.s.cfg.lookupImage(cfg.Image); !ok {
		return errf(http.StatusUnprocessableEntity, "failed to resolve image %q: not an image of this sim (known: %s)",
			cfg.Image, strings.Join(a.s.cfg.imageNames(), ", "))
	}
	if err := validMetadata(cfg.Metadata); err != nil {
		return err
	}
	if sc := cfg.StopConfig; sc != nil && sc.Signal != nil {
		if _, err := parseSignal(*sc.Signal); err != nil {
			return errf(http.StatusBadRequest, "%v", err)
		}
	}
	return nil
}

// launchInput decodes and validates the body of a create or an update of
// a machine of ap. A min_secrets_version newer than the app's secrets is
// refused, as Fly refuses one its secrets store has not reached.
func (a *apiServer) launchInput(r *http.Request, ap *app) (fly.LaunchMachineInput, error) {
	var in fly.LaunchMachineInput
	if err := decodeBody(r, &in); err != nil {
		return in, err
	}
	if v := in.MinSecretsVersion; v != nil {
		a.s.mu.Lock()
		have := ap.secretsVersion
		a.s.mu.Unlock()
		if *v > have {
			return in, errf(http.StatusUnprocessableEntity, "min_secrets_version %d is newer than the app's secrets (version %d)", *v, have)
		}
	}
	return in, a.validConfig(in.Config)
}

// createMachine is POST /v1/apps/{app}/machines (flaps Launch).
func (a *apiServer) createMachine(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	in, err := a.launchInput(r, ap)
	if err != nil {
		return err
	}
	region := in.Region
	if region == "" {
		region = ap.cfg.PrimaryRegion
	}
	if !regionRE.MatchString(region) {
		return errf(http.StatusBadRequest, "invalid region %q", region)
	}
	m, err := a.s.createMachine(ap, "", in.Name, region, copyConfig(in.Config), sourceUser)
	if err != nil {
		return errf(http.StatusServiceUnavailable, "failed to create machine: %v", err)
	}
	if !in.SkipLaunch {
		a.s.enqueueStart(m)
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	writeJSON(w, http.StatusOK, a.viewLocked(m))
	return nil
}

// updateMachine is POST /v1/apps/{app}/machines/{id} (flaps Update): the
// full new config, a new version and instance id, and a restart of the
// process (Fly replaces the running VM on every update), unless
// skip_launch leaves it stopped.
func (a *apiServer) updateMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOnUpHost(r)
	if err != nil {
		return err
	}
	in, err := a.launchInput(r, m.app)
	if err != nil {
		return err
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.state == StateDestroyed || m.state == StateDestroying {
		return errf(http.StatusNotFound, "machine not found")
	}
	if err := s.checkNonceLocked(m, r); err != nil {
		return err
	}
	if in.Region != "" && in.Region != m.region {
		return errf(http.StatusBadRequest, "cannot move machine %s from %s to %s with an update", m.id, m.region, in.Region)
	}
	now := s.clk.Now()
	m.config = copyConfig(in.Config)
	s.cfg.Platform.fillDefaults(m.config)
	if in.Name != "" {
		m.name = in.Name
	}
	m.version, m.instanceID = newULID(now), newULID(now)
	m.eventLocked(now, "update", "replacing", "user", nil)
	running := m.pid != 0 || m.state == StateStarting || m.state == StateStarted
	var o *op
	switch {
	case !in.SkipLaunch:
		o = &op{kind: opRestart}
		if running {
			stopping := StateStopping
			if s.cfg.Platform.MidUpdateStates {
				stopping = StateReplacing // Fly: a configuration change in progress
			}
			m.setStateLocked(stopping, now)
		} else {
			m.setStateLocked(StateStarting, now)
		}
	case running:
		o = &op{kind: opStop}
		m.setStateLocked(StateStopping, now)
	}
	if o != nil {
		if err := s.enqueue(m, *o); err != nil {
			return errf(http.StatusTooManyRequests, "%v", err)
		}
	}
	writeJSON(w, http.StatusOK, a.viewLocked(m))
	return nil
}

// destroyMachine is DELETE /v1/apps/{app}/machines/{id}?kill=&force=. A
// running machine is destroyed only with kill or force.
func (a *apiServer) destroyMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	force := q.Get("kill") == "true" || q.Get("force") == "true"
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.state == StateDestroyed || m.state == StateDestroying {
		return errf(http.StatusNotFound, "machine not found")
	}
	if err := s.checkNonceLocked(m, r); err != nil {
		return err
	}
	if !force && m.state != StateStopped && m.state != StateCreated && m.state != StateFailed {
		return errf(http.StatusPreconditionFailed, "unable to destroy machine, not currently stopped")
	}
	if err := s.enqueue(m, op{kind: opDestroy}); err != nil {
		return errf(http.StatusTooManyRequests, "%v", err)
	}
	m.setStateLocked(StateDestroying, s.clk.Now())
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// startMachine is POST .../start.
func (a *apiServer) startMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOnUpHost(r)
	if err != nil {
		return err
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.state == StateDestroyed || m.state == StateDestroying {
		return errf(http.StatusNotFound, "machine not found")
	}
	if err := s.checkNonceLocked(m, r); err != nil {
		return err
	}
	prev := m.state
	if prev != StateStarted && prev != StateStarting {
		if err := s.enqueue(m, op{kind: opStart}); err != nil {
			return errf(http.StatusTooManyRequests, "%v", err)
		}
		m.setStateLocked(StateStarting, s.clk.Now())
	}
	writeJSON(w, http.StatusOK, fly.MachineStartResponse{Status: "success", PreviousState: prev})
	return nil
}

// stopMachine is POST .../stop with an optional {"signal","timeout"} body
// overriding the config's stop_config.
func (a *apiServer) stopMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOnUpHost(r)
	if err != nil {
		return err
	}
	var in fly.StopMachineInput
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	o := op{kind: opStop, timeout: in.Timeout.Duration}
	if in.Signal != "" {
		sig, err := parseSignal(in.Signal)
		if err != nil {
			return errf(http.StatusBadRequest, "%v", err)
		}
		o.signal = sig
	}
	return a.stopLike(w, r, m, o)
}

// restartMachine is POST .../restart?signal=&timeout=&force_stop=.
func (a *apiServer) restartMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOnUpHost(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	o := op{kind: opRestart}
	if v := q.Get("signal"); v != "" {
		sig, err := parseSignal(v)
		if err != nil {
			return errf(http.StatusBadRequest, "%v", err)
		}
		o.signal = sig
	}
	if q.Get("force_stop") == "true" {
		o.signal = syscall.SIGKILL
	}
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return errf(http.StatusBadRequest, "invalid timeout %q", v)
		}
		o.timeout = min(d, MaxKillTimeout)
	}
	return a.stopLike(w, r, m, o)
}

func (a *apiServer) stopLike(w http.ResponseWriter, r *http.Request, m *machine, o op) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.state == StateDestroyed || m.state == StateDestroying {
		return errf(http.StatusNotFound, "machine not found")
	}
	if err := s.checkNonceLocked(m, r); err != nil {
		return err
	}
	if err := s.enqueue(m, o); err != nil {
		return errf(http.StatusTooManyRequests, "%v", err)
	}
	if m.state == StateStarted || m.state == StateStarting || o.kind == opRestart {
		m.setStateLocked(StateStopping, s.clk.Now())
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// cordon is POST .../cordon and .../uncordon: a cordoned machine keeps
// running but the proxy stops balancing onto it.
func (a *apiServer) cordon(on bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		m, err := a.machineOf(r)
		if err != nil {
			return err
		}
		s := a.s
		s.mu.Lock()
		defer s.mu.Unlock()
		if m.state == StateDestroyed || m.state == StateDestroying {
			return errf(http.StatusNotFound, "machine not found")
		}
		if m.cordoned != on {
			m.cordoned = on
			typ := "uncordon"
			if on {
				typ = "cordon"
			}
			m.eventLocked(s.clk.Now(), typ, m.state, "user", nil)
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
		return nil
	}
}
