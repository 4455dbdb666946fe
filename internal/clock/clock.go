// Package clock is the injected time source of every component that waits or
// expires: Real in production, Fake in tests, so a 30 s heartbeat or a 300 s
// room expiry is driven by Advance instead of sleeping.
//
// Only what the components use is here: Now, tickers, timers and AfterFunc.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and makes tickers and timers.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has passed, as
	// time.AfterFunc does; Stop before then prevents the call. The Timer's
	// C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Ticker is the subset of *time.Ticker the components use.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Timer is the subset of *time.Timer the components use.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time { return time.Now() }
func (Real) NewTicker(d time.Duration) Ticker {
	return realTicker{time.NewTicker(d)}
}
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }
func (Real) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// OrReal returns c, or Real when c is nil.
func OrReal(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Fake is a manual clock for tests. Tickers and timers fire (without
// blocking: a full channel drops the tick, as time.Ticker does) when Advance
// moves the time past their deadline. An AfterFunc function that falls due
// runs in its own goroutine, and Advance returns once it has returned, so a
// test sees its effect right after Advance (f must not wait for the caller
// of Advance).
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

// NewFake returns a Fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

type fakeWaiter struct {
	f      *Fake
	c      chan time.Time
	at     time.Time
	period time.Duration // 0 for a timer
	fn     func()        // AfterFunc's function, nil otherwise (then c is nil)
	active bool
}

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d and fires what fell due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	var due []func()
	for _, w := range f.waiters {
		for w.active && !w.at.After(now) {
			if w.fn != nil {
				due = append(due, w.fn)
			} else {
				select {
				case w.c <- w.at:
				default:
				}
			}
			if w.period > 0 {
				w.at = w.at.Add(w.period)
			} else {
				w.active = false
			}
		}
	}
	f.mu.Unlock()
	// Outside the lock: f may use the clock (Now, a new timer, Stop).
	var wg sync.WaitGroup
	for _, fn := range due {
		wg.Go(fn)
	}
	wg.Wait()
}

// Waiters reports how many tickers and timers are active (tests use it to
// know a goroutine has reached its wait).
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.waiters {
		if w.active {
			n++
		}
	}
	return n
}

func (f *Fake) add(d, period time.Duration, fn func()) *fakeWaiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{f: f, at: f.now.Add(d), period: period, fn: fn, active: true}
	if fn == nil {
		w.c = make(chan time.Time, 1)
	}
	f.waiters = append(f.waiters, w)
	return w
}

func (f *Fake) NewTicker(d time.Duration) Ticker { return fakeTicker{f.add(d, d, nil)} }
func (f *Fake) NewTimer(d time.Duration) Timer   { return fakeTimer{f.add(d, 0, nil)} }
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return fakeTimer{f.add(d, 0, fn)}
}

type fakeTicker struct{ w *fakeWaiter }

func (t fakeTicker) C() <-chan time.Time { return t.w.c }
func (t fakeTicker) Stop() {
	t.w.f.mu.Lock()
	t.w.active = false
	t.w.f.mu.Unlock()
}
func (t fakeTicker) Reset(d time.Duration) {
	t.w.f.mu.Lock()
	t.w.at, t.w.period, t.w.active = t.w.f.now.Add(d), d, true
	t.w.f.mu.Unlock()
}

type fakeTimer struct{ w *fakeWaiter }

func (t fakeTimer) C() <-chan time.Time { return t.w.c }
func (t fakeTimer) Stop() bool {
	t.w.f.mu.Lock()
	defer t.w.f.mu.Unlock()
	was := t.w.active
	t.w.active = false
	return was
}
func (t fakeTimer) Reset(d time.Duration) bool {
	t.w.f.mu.Lock()
	defer t.w.f.mu.Unlock()
	was := t.w.active
	t.w.at, t.w.active = t.w.f.now.Add(d), true
	return was
}

// Sleep waits d on clock c (nil: the wall clock), or until ctx ends, in
// which case it returns the context's cause.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	t := OrReal(c).NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Every calls fn every d on clock c (nil: the wall clock) until ctx ends.
// The first call is one interval after the start.
func Every(ctx context.Context, c Clock, d time.Duration, fn func()) {
	t := OrReal(c).NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			fn()
		}
	}
}
