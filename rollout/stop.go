package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
)

// ErrOutput is the cause of a rollout stopped because its output could
// not be written (see StopOnWriteError).
var ErrOutput = errors.New("the rollout's output could not be written")

// StopOnWriteError returns a writer for a rollout's printer: the first
// write to w that fails (stdout a pipe whose reader is gone, EPIPE, as
// in `purrctl rollout prod --json | head -3`) calls stop with ErrOutput
// and the write's error. stop cancels the context given to Run, which
// then unwinds as when interrupted: the relay it drained is given back,
// its lease released, and Run returns an interrupted *Failure. Nothing
// is written to w after a failed write; later writes report success.
func StopOnWriteError(w io.Writer, stop context.CancelCauseFunc) io.Writer {
	return &stopWriter{w: w, stop: stop}
}

type stopWriter struct {
	w    io.Writer               // static
	stop context.CancelCauseFunc // static

	mu     sync.Mutex // guards failed and serializes writes to w
	failed bool
}

func (s *stopWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return len(p), nil
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.failed = true
		s.stop(fmt.Errorf("%w: %w", ErrOutput, err))
	}
	return n, err
}

// PanicError is a panic on the rollout's goroutine, in the rollout or in
// an Observer, caught so that the step it broke still gives back the
// relay it drained and releases its lease. Run returns it in a *Failure.
type PanicError struct {
	Value any
	Stack []byte // the panicking goroutine's stack, where it was caught
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap is the panic's value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// catchPanic, deferred, turns a panic into *err, so that the deferred
// calls before it (undrain, the lease's release) see a failed step.
func catchPanic(err *error) {
	if p := recover(); p != nil {
		*err = failf(&PanicError{Value: p, Stack: debug.Stack()}, "the rollout panicked (a bug)")
	}
}

// guard runs fn, a panic in it returned as an error.
func guard(fn func() error) (err error) {
	defer catchPanic(&err)
	return fn()
}
