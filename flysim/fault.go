package flysim

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Fault makes the Machines API misbehave on purpose, so a deploy tool can be
// tested against the failures it meets on Fly: an error status, a slow
// answer, or a lost response (the change is made, the answer never arrives).
// Inject with Sim.InjectFault or, from another process, POST the JSON to
// <machines_api>/flysim/v1/faults with the token.
type Fault struct {
	// Action is the API call to hit: list_apps, create_app, get_app, list,
	// create, get, update, destroy, start, stop, restart, signal, cordon,
	// uncordon, wait, events, find_lease, acquire_lease, release_lease,
	// list_ips, assign_ip, delete_ip, list_secrets, update_secrets,
	// get_secret, set_secret, delete_secret.
	Action string `json:"action"`
	// App and Machine, when set, narrow the requests hit.
	App     string `json:"app,omitempty"`
	Machine string `json:"machine,omitempty"`
	// Status answers the request with this status (400-599) and a Fly error
	// instead of handling it.
	Status int `json:"status,omitempty"`
	// DropResponse handles the request, then closes the connection without
	// an answer.
	DropResponse bool `json:"drop_response,omitempty"`
	// DelayMS holds the request this long before anything else.
	DelayMS int `json:"delay_ms,omitempty"`
	// Times is how many matching requests the fault hits (default 1).
	Times int `json:"times,omitempty"`
}

var faultActions = []string{"list_apps", "create_app", "get_app", "list", "create", "get", "update", "destroy", "start",
	"stop", "restart", "signal", "cordon", "uncordon", "wait", "events", "find_lease", "acquire_lease", "release_lease",
	"list_ips", "assign_ip", "delete_ip", "list_secrets", "update_secrets", "get_secret", "set_secret", "delete_secret"}

// InjectFault arms f; faults are consumed in the order injected.
func (s *Sim) InjectFault(f Fault) error {
	if !slices.Contains(faultActions, f.Action) {
		return fmt.Errorf("unknown fault action %q", f.Action)
	}
	if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
		return fmt.Errorf("fault status %d is not an error status", f.Status)
	}
	if f.Status == 0 && !f.DropResponse && f.DelayMS <= 0 {
		return errors.New("a fault needs a status, drop_response or delay_ms")
	}
	if f.DelayMS < 0 || f.DelayMS > 300_000 || f.Times < 0 {
		return errors.New("fault delay_ms or times out of range")
	}
	if f.Times == 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
	return nil
}

// takeFault consumes one hit of the first fault matching the request.
func (s *Sim) takeFault(action, app, id string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Action != action || (f.App != "" && f.App != app) || (f.Machine != "" && f.Machine != id) {
			continue
		}
		f.Times--
		if f.Times <= 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		c := *f
		return &c
	}
	return nil
}

// serveWithFaults runs next unless an armed fault says otherwise.
func (s *Sim) serveWithFaults(w http.ResponseWriter, r *http.Request, action string, next http.HandlerFunc) {
	f := s.takeFault(action, r.PathValue("app"), r.PathValue("id"))
	if f == nil {
		next(w, r)
		return
	}
	if f.DelayMS > 0 {
		t := time.NewTimer(time.Duration(f.DelayMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch {
	case f.Status != 0:
		writeFlyError(w, errf(f.Status, "injected fault: %s answers %d", action, f.Status))
	case f.DropResponse:
		next(discardWriter{h: http.Header{}}, r)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	default:
		next(w, r)
	}
}

// discardWriter swallows an answer that is to be lost.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
