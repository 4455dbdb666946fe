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
	// Next is what to do about it, one line for a human.
	Next  string
	Fleet []MachineResult

	launch bool // a launch's failure (what stopped, and what to re-run, is the launch)
}

// command is what stopped: "launch" or "rollout".
func (f *Failure) command() string {
	if f.launch || f.Phase == PhaseLaunch {
		return "launch"
	}
	return "rollout"
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s stopped in phase %s", f.command(), f.Phase)
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
	if f.Next != "" {
		fmt.Fprintf(&b, "; next: %s", f.Next)
	}
	return b.String()
}

func (f *Failure) Unwrap() error { return f.Err }

// Interrupted reports whether the rollout stopped because ctx was cancelled
// (Ctrl-C) rather than because something failed.
func (f *Failure) Interrupted() bool { return errors.Is(f.Err, context.Canceled) }

// nextStep says what to do about f. drained is the boot the failed step
// left drained ("" none) and undrainURL the route that gives it back.
func nextStep(f *Failure, drained, undrainURL string) string {
	var lh *LeaseHeldError
	var pe *PanicError
	rerun := "re-run the rollout (machines already on the image are verified, not redeployed)"
	if f.command() == "launch" {
		rerun = "re-run the launch (it creates only what is still missing; machines already on the image are verified, not redeployed)"
	}
	var next string
	switch {
	case errors.As(f.Err, &pe):
		next = "this is a bug: please report it with the stack trace; its lease was released; " + rerun
	case f.Interrupted():
		next = "its leases were released; " + rerun + " to go on"
	case errors.As(f.Err, &lh):
		next = "another deploy (or an operator) holds the lease: let it finish or release it, then " + rerun
	case f.Machine != "" && f.RolledBack:
		next = fmt.Sprintf("fix the image (why it failed: fly logs -a %s -i %s), then %s", f.App, f.Machine, rerun)
	case f.Machine != "":
		next = fmt.Sprintf("see why in the machine's log (fly logs -a %s -i %s), fix it, then %s", f.App, f.Machine, rerun)
		if !f.Rollback {
			next += "; --rollback puts a failed machine back on its previous image"
		}
	case f.Phase == PhaseLaunch:
		next = "fix what the reason names, then " + rerun
	case f.Phase == PhaseRegister || f.Phase == PhaseSmoke:
		next = "the machines run the new image; see why with purrctl smoke against the balancer, then " + rerun
	default:
		next = "fix what the reason names (fly/rollout.toml, FLY_API_TOKEN, the Machines API), then " + rerun
	}
	if drained != "" {
		next = fmt.Sprintf("boot %s of machine %s is still drained (it takes no new rooms): POST %s with the SECRET "+
			"(a re-run also gives it back); %s", drained, f.Machine, undrainURL, next)
	}
	return next
}

// interruption is the error of a rollout its context stopped: the cause
// (a signal, a closed output) and the step's error it cut short. Its
// message is the cause alone; the Failure's Reason tells the rest.
type interruption struct{ ctxErr, cause, err error }

func (e *interruption) Error() string   { return e.cause.Error() }
func (e *interruption) Unwrap() []error { return []error{e.ctxErr, e.cause, e.err} }

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
