package flysim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"syscall"
)

// signalMachine is POST .../signal {"signal": "SIGKILL"} (or the number, as
// flaps' Kill sends {"signal": 9}): the signal goes to the machine's
// process group, as Fly's init delivers it. It is not a stop request: a
// process that dies of it exits as a crash would (exit event with
// requested_stop false), and the machine's restart policy decides what
// happens next (restart.go).
func (a *apiServer) signalMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOnUpHost(r)
	if err != nil {
		return err
	}
	var in struct {
		Signal json.RawMessage `json:"signal"`
	}
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	sig, err := parseSignalValue(in.Signal)
	if err != nil {
		return err
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.state == StateDestroyed || m.state == StateDestroying {
		return errf(http.StatusNotFound, "machine not found")
	}
	if m.state != StateStarted || m.pid == 0 {
		return errf(http.StatusPreconditionFailed, "machine %s is %s, not started", m.id, m.state)
	}
	if err := s.checkNonceLocked(m, r); err != nil {
		return err
	}
	if err := s.enqueue(m, op{kind: opSignal, signal: sig}); err != nil {
		return errf(http.StatusTooManyRequests, "%v", err)
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// parseSignalValue reads a signal given by name ("SIGKILL") or number (9).
func parseSignalValue(raw json.RawMessage) (syscall.Signal, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if n, err := strconv.Atoi(name); err == nil {
			return signalNumber(n)
		}
		sig, err := parseSignal(name)
		if err != nil {
			return 0, errf(http.StatusBadRequest, "unknown signal %q", name)
		}
		return sig, nil
	}
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return signalNumber(n)
	}
	return 0, errf(http.StatusBadRequest, "signal must be a name such as SIGKILL or its number")
}

func signalNumber(n int) (syscall.Signal, error) {
	for _, v := range signals {
		if int(v) == n {
			return v, nil
		}
	}
	return 0, errf(http.StatusBadRequest, "unsupported signal %d", n)
}
