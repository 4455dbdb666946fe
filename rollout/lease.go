package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/purrfly/purrfly/internal/clock"

	fly "github.com/superfly/fly-go"
)

// ErrLeaseLost ends a machine's step when its lease could not be refreshed:
// someone else may now change the machine, so the step must not.
var ErrLeaseLost = errors.New("lost the machine lease")

// LeaseHeldError says a machine's lease is held by someone else (another
// deploy, an operator) and was not released within the lease wait.
type LeaseHeldError struct {
	App, Machine string
	Owner        string
	ExpiresAt    time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("lease on machine %s of %s is held by %s until %s (another deploy running?)",
		e.Machine, e.App, e.Owner, e.ExpiresAt.UTC().Format(time.RFC3339))
}

// lease is a held machine lease. Its refresher goroutine renews it every
// third of its TTL and, if that fails, cancels the step's context with
// ErrLeaseLost. release stops the refresher and releases the lease.
type lease struct {
	api     *machinesAPI // static
	app, id string       // static
	ttl     int          // seconds; static

	mu    sync.Mutex // guards nonce
	nonce string

	stop chan struct{} // closed by release
	done chan struct{} // closed when the refresher ends
	once sync.Once     // release runs once
}

// acquireLease takes the machine's lease. A lease held by someone else is
// watched with FindLease (within the rate limit) for at most wait, then
// reported as a *LeaseHeldError; flaps' AcquireLease, which retries a 409
// several times a second for up to a minute, is called only once the
// lease looks free, and bounded by what is left of wait. A held lease
// whose expiry does not move for half of ttl is not being refreshed (a
// live rollout of ours refreshes every third): its holder is gone (a
// rollout that was killed leaves its lease for up to its TTL), so it is
// waited out and taken over when it expires, if that is within
// max(ttl, DefaultLeaseTTL) and within wait+2·ttl of first seeing it; so
// a held lease is watched for at least half of ttl, whatever wait says.
// say (may be nil) hears what is waited for: once when it changes (wait
// ""), then at every look at the held lease as progress (wait WaitLease
// or WaitTakeover, until when). The refresher runs until release and
// cancels the step through cancel.
func (a *machinesAPI) acquireLease(ctx context.Context, app, id string, ttl, wait time.Duration, cancel context.CancelCauseFunc,
	say func(wait, msg string, until time.Time)) (*lease, error) {
	secs := int(ttl / time.Second)
	deadline := a.now().Add(wait)
	if say == nil {
		say = func(string, string, time.Time) {}
	}
	var (
		expiry    int64     // the held lease's expiry as last seen
		expirySet time.Time // when that expiry was first seen
		firstSeen time.Time // when a held lease was first seen
		told      int       // 0: nothing said; 1: waiting said; 2: takeover said
	)
	for {
		var held *fly.MachineLease
		err := a.call(ctx, "find_lease", id, apiRequestTimeout, func(rctx context.Context) error {
			var err error
			held, err = a.c.FindLease(rctx, app, id)
			return err
		})
		if err != nil || held == nil || held.Data == nil || held.Data.Nonce == "" && held.Data.Owner == "" {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			break // none held (404), or unknown: let AcquireLease decide
		}
		now, until := a.now(), time.Unix(held.Data.ExpiresAt, 0)
		if held.Data.ExpiresAt != expiry {
			expiry, expirySet = held.Data.ExpiresAt, now
		}
		if told == 0 {
			// Watched long enough to tell a live holder from a gone one.
			told, firstSeen, deadline = 1, now, later(deadline, now.Add(ttl/2+time.Second))
			say("", fmt.Sprintf("lease of machine %s is held by %s until %s: waiting up to %s for it", id, held.Data.Owner,
				until.UTC().Format(time.TimeOnly), deadline.Sub(a.now()).Round(time.Second)), time.Time{})
		}
		if left := until.Sub(now); now.Sub(expirySet) >= ttl/2 && left <= max(ttl, DefaultLeaseTTL) {
			if told < 2 {
				told = 2
				say("", fmt.Sprintf("lease of machine %s held by %s is not being refreshed (a run that was killed?): taking it over when it expires, in %s",
					id, held.Data.Owner, left.Round(time.Second)), time.Time{})
			}
			// Bounded: a holder that refreshes less often than we judge
			// extends the wait by two TTLs at most.
			deadline = later(deadline, earlier(until.Add(time.Second), firstSeen.Add(wait+2*ttl)))
		}
		if !now.Before(deadline) {
			return nil, &LeaseHeldError{App: app, Machine: id, Owner: held.Data.Owner, ExpiresAt: until}
		}
		if told == 2 {
			say(WaitTakeover, fmt.Sprintf("waiting for the lease of machine %s, held by %s and not refreshed, to expire", id, held.Data.Owner), deadline)
		} else {
			say(WaitLease, fmt.Sprintf("waiting for the lease of machine %s, held by %s until %s", id, held.Data.Owner,
				until.UTC().Format(time.TimeOnly)), deadline)
		}
	}
	if err := a.limit.wait(ctx, "acquire_lease/"+id); err != nil {
		return nil, err
	}
	actx, acancel := context.WithTimeout(ctx, max(deadline.Sub(a.now()), time.Second))
	got, err := a.c.AcquireLease(actx, app, id, &secs)
	acancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		fctx, fcancel := context.WithTimeout(ctx, apiRequestTimeout)
		held, ferr := a.c.FindLease(fctx, app, id)
		fcancel()
		if ferr == nil && held != nil && held.Data != nil {
			return nil, &LeaseHeldError{App: app, Machine: id, Owner: held.Data.Owner, ExpiresAt: time.Unix(held.Data.ExpiresAt, 0)}
		}
		return nil, fmt.Errorf("failed to acquire the lease of machine %s: %w", id, err)
	}
	if got == nil || got.Data == nil || got.Data.Nonce == "" {
		return nil, fmt.Errorf("failed to acquire the lease of machine %s: answer carries no nonce", id)
	}
	l := &lease{api: a, app: app, id: id, ttl: secs, nonce: got.Data.Nonce,
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.refresh(cancel)
	return l, nil
}

// Nonce is the current lease nonce, sent with every change of the machine.
func (l *lease) Nonce() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nonce
}

func (l *lease) refresh(cancel context.CancelCauseFunc) {
	defer close(l.done)
	every := time.Duration(l.ttl) * time.Second / 3
	t := clock.OrReal(l.api.clock).NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C():
		}
		// Retries must end well before the lease would expire.
		ctx, c := context.WithTimeout(context.Background(), every)
		go func() {
			select {
			case <-l.stop:
				c()
			case <-ctx.Done():
			}
		}()
		err := l.api.call(ctx, "refresh_lease", l.id, every, func(rctx context.Context) error {
			// release stops the waits and retries around a refresh, not a
			// refresh already sent: cut short, it could still reach the
			// Machines API after the release, where a refresh of a lease
			// that is gone takes a new one, left behind for a whole TTL.
			// release waits for its answer instead (at most every).
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(rctx), every)
			defer rcancel()
			got, err := l.api.c.RefreshLease(rctx, l.app, l.id, &l.ttl, l.Nonce())
			if err == nil && got != nil && got.Data != nil && got.Data.Nonce != "" {
				l.mu.Lock()
				l.nonce = got.Data.Nonce
				l.mu.Unlock()
			}
			return err
		})
		stopped := ctx.Err() != nil && isClosed(l.stop)
		c()
		if stopped {
			return
		}
		if err != nil {
			cancel(fmt.Errorf("%w on machine %s: %w", ErrLeaseLost, l.id, err))
			return
		}
	}
}

// release stops the refresher and releases the lease (with its own short
// deadline, so it also runs after the rollout's context was cancelled).
func (l *lease) release() error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		err = l.api.call(ctx, "release_lease", l.id, 5*time.Second, func(rctx context.Context) error {
			err := l.api.c.ReleaseLease(rctx, l.app, l.id, l.Nonce())
			if statusOf(err) == 404 { // already gone (expired): nothing to release
				return nil
			}
			return err
		})
		if err != nil {
			err = fmt.Errorf("failed to release the lease of machine %s: %w", l.id, err)
		}
	})
	return err
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
