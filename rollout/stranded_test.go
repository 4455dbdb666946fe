package rollout_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

// TestRolloutExitPathsStrandNothing: a rollout that stops while relay-a
// drains (a busy room keeps the drain waiting), by Ctrl-C, by its output
// failing with EPIPE (stdout piped into `head`) or by a panic in an
// Observer, gives relay-a back, releases every lease and touches nothing
// else; a plain re-run then succeeds.
func TestRolloutExitPathsStrandNothing(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	relayA := f.machine(t, "purrfly-relay-a").ID
	room := openRoom(t, ctx, f, "ams") // on relay-a: its drain waits
	defer room.close()
	room.readUntilClosed()

	t.Run("SIGINT mid-drain", func(t *testing.T) {
		signal := errors.New("interrupt signal received")
		cctx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		o := f.opts("purrfly:v2")
		var undrained bool
		o.Observer = func(ev rollout.Event) {
			if ev.Machine == relayA && ev.Wait == rollout.WaitDrain {
				stop(signal) // what signal.NotifyContext does on Ctrl-C
			}
			undrained = undrained || ev.Status == rollout.StatusUndrained && strings.Contains(ev.Message, "takes new rooms again")
		}
		_, err := rollout.Run(cctx, o)
		var fl *rollout.Failure
		if !errors.As(err, &fl) || !fl.Interrupted() || !errors.Is(err, signal) || fl.Machine != relayA {
			t.Fatalf("want an interrupted failure at relay-a, got %v", err)
		}
		if !undrained {
			t.Error("the interrupted rollout did not say it gave relay-a back")
		}
		nothingStranded(t, ctx, f)
	})

	t.Run("EPIPE on the output", func(t *testing.T) {
		cctx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		out := &brokenPipe{breakOn: `"status":"draining"`}
		o := f.opts("purrfly:v2")
		o.Observer = rollout.JSONPrinter(rollout.StopOnWriteError(out, stop))
		_, err := rollout.Run(cctx, o)
		var fl *rollout.Failure
		if !errors.As(err, &fl) || !fl.Interrupted() || !errors.Is(err, rollout.ErrOutput) || !errors.Is(err, syscall.EPIPE) ||
			fl.Machine != relayA {
			t.Fatalf("want the rollout stopped at relay-a by its output, got %v", err)
		}
		if n := out.writesAfterBreak(); n != 0 {
			t.Errorf("%d write(s) after the output broke", n)
		}
		nothingStranded(t, ctx, f)
	})

	t.Run("panic in an observer", func(t *testing.T) {
		o := f.opts("purrfly:v2")
		calls := 0
		o.Observer = func(ev rollout.Event) {
			calls++
			if ev.Machine == relayA && ev.Wait == rollout.WaitDrain {
				panic("observer bug")
			}
		}
		_, err := rollout.Run(ctx, o)
		var fl *rollout.Failure
		var pe *rollout.PanicError
		if !errors.As(err, &fl) || !errors.As(err, &pe) || pe.Value != "observer bug" || fl.Machine != relayA || fl.Interrupted() {
			t.Fatalf("want the panic returned as a failure at relay-a, got %v", err)
		}
		if !bytes.Contains(pe.Stack, []byte("TestRolloutExitPathsStrandNothing")) || !strings.Contains(fl.Next, "this is a bug") {
			t.Errorf("the panic's failure lacks the stack or the next step: %q\n%s", fl.Next, pe.Stack)
		}
		panicked := calls
		nothingStranded(t, ctx, f)
		if calls != panicked {
			t.Errorf("the observer was called %d more time(s) after it panicked", calls-panicked)
		}
	})

	if _, err := rollout.Run(ctx, f.opts("purrfly:v2")); err != nil {
		t.Fatalf("plain re-run: %v", err)
	}
	for _, app := range f.apps {
		if m := f.machine(t, app); updates(m) != 1 || m.Config.Image != "purrfly:v2" {
			t.Errorf("after the re-run %s: %d updates, image %s", app, updates(m), m.Config.Image)
		}
	}
	f.noLeases(t)
}

// nothingStranded: every relay is live at the balancer and serving (none
// left drained), no lease is held, and no machine was updated (the run
// stopped during relay-a's drain, before its update).
func nothingStranded(t *testing.T, ctx context.Context, f *fleet) {
	t.Helper()
	insts, err := client.NewBalancer(f.env.Balancer.URL).Instances(ctx, simSecret)
	if err != nil || len(insts) != 2 {
		t.Fatalf("balancer lists %d relays (%v), want 2", len(insts), err)
	}
	for _, in := range insts {
		if in.Status != wire.InstanceLive {
			t.Errorf("%s (boot %s) is %s at the balancer, want live", in.MachineID, in.BootID, in.Status)
		}
	}
	for _, app := range f.apps {
		m := f.machine(t, app)
		if p := ping(t, f, app, m.ID); p.Draining {
			t.Errorf("%s says it is draining", app)
		}
		if updates(m) != 0 || m.Config.Image != "purrfly:v1" || m.State != "started" {
			t.Errorf("%s was touched: %d updates, image %s, state %s", app, updates(m), m.Config.Image, m.State)
		}
	}
	f.noLeases(t)
}

// brokenPipe is stdout piped into a reader that went away: the first write
// holding breakOn, and every one after it, fails with EPIPE as os.Stdout's
// Write does.
type brokenPipe struct {
	breakOn string

	mu     sync.Mutex // guards the fields below
	broken bool
	after  int // writes tried after the first failure
	b      bytes.Buffer
}

func (p *brokenPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken {
		p.after++
	}
	if p.broken || strings.Contains(string(b), p.breakOn) {
		p.broken = true
		return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}
	}
	return p.b.Write(b)
}

func (p *brokenPipe) writesAfterBreak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.after
}
