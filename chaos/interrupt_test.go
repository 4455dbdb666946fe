package chaos

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/flysim"
)

// faultWatch is a progress sink that cancels the soak at its first fault.
type faultWatch struct {
	mu     sync.Mutex
	b      bytes.Buffer
	cancel context.CancelFunc
}

func (w *faultWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), " fault ") {
		w.cancel()
	}
	return len(p), nil
}

func (w *faultWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestChaosInterrupted: a soak stopped during its storm (Ctrl-C) says it
// was interrupted, with what it had done, and judges nothing: no leak and
// no lost room is reported for a fleet it never healed nor settled.
func TestChaosInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fleet")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stop, interrupt := context.WithCancel(ctx)
	defer interrupt()
	progress := &faultWatch{cancel: interrupt}
	rep, err := Run(stop, Options{
		Config:   isolated(t),
		Sim:      flysim.Options{LogDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Executable: purrctl, CheckRetry: 50 * time.Millisecond},
		Duration: time.Minute, Seed: 11, Rooms: 2, Players: 1,
		Progress: progress,
	})
	var stopped *InterruptedError
	if !errors.As(err, &stopped) || rep != nil {
		t.Fatalf("interrupted soak: report %v, error %v; want an InterruptedError\n%s", rep, err, progress)
	}
	if stopped.Seed != 11 || stopped.Faults > 1 || !strings.Contains(err.Error(), "before its invariants were judged") {
		t.Fatalf("InterruptedError %+v (%v)", stopped, err)
	}
	if strings.Contains(progress.String(), "VIOLATION") {
		t.Fatalf("an interrupted soak reported a violation:\n%s", progress)
	}
}
