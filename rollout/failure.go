package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Failure is why a rollout stopped. Every machine not yet reached was left
// as it was; Fleet shows which machine runs which image and boot right after
// the stop.
type Failure struct {
	Phase   Phase
	App     string
	Machine string
	// Reason is one line for a human: what did not happen in time.
	Reason string
	Err    error
	// Rollback is set when --rollback ran for the failed machine: RolledBack
	// when it was restored and verified, RollbackErr otherwise.
	Rollback    bool
	RolledBack  bool
	RollbackErr error
	Fleet       []MachineResult
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rollout stopped in phase %s", f.Phase)
	if f.Machine != "" {
		fmt.Fprintf(&b, " at machine %s of %s", f.Machine, f.App)
	}
	fmt.Fprintf(&b, ": %s", f.Reason)
	if f.Err != nil && !strings.Contains(f.Reason, f.Err.Error()) {
		fmt.Fprintf(&b, ": %v", f.Err)
	}
	switch {
	case f.RolledBack:
		b.WriteString(" (rolled back: the machine runs its previous image again)")
	case f.Rollback:
		fmt.Fprintf(&b, " (rollback failed: %v)", f.RollbackErr)
	}
	return b.String()
}

func (f *Failure) Unwrap() error { return f.Err }

// Interrupted reports whether the rollout stopped because ctx was cancelled
// (Ctrl-C) rather than because something failed.
func (f *Failure) Interrupted() bool { return errors.Is(f.Err, context.Canceled) }

// ConfigError is a problem with the environment or options (no token, no
// secret, bad image): nothing was touched.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErrorf(format string, args ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, args...)}
}

// stepError is a machine step's failure with its reason.
type stepError struct {
	reason string
	err    error
}

func (e *stepError) Error() string {
	if e.err == nil {
		return e.reason
	}
	return e.reason + ": " + e.err.Error()
}
func (e *stepError) Unwrap() error { return e.err }

func failf(err error, format string, args ...any) error {
	return &stepError{reason: fmt.Sprintf(format, args...), err: err}
}
