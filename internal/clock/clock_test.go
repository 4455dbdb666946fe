package clock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestFakeTickerAndTimer(t *testing.T) {
	f := NewFake(time.Unix(100, 0))
	tick := f.NewTicker(10 * time.Second)
	timer := f.NewTimer(25 * time.Second)
	f.Advance(9 * time.Second)
	select {
	case <-tick.C():
		t.Fatal("ticker fired early")
	case <-timer.C():
		t.Fatal("timer fired early")
	default:
	}
	f.Advance(1 * time.Second)
	if at := <-tick.C(); !at.Equal(time.Unix(110, 0)) {
		t.Fatalf("tick at %v", at)
	}
	f.Advance(15 * time.Second)
	<-tick.C() // the tick at 120; it is 125 now
	if at := <-timer.C(); !at.Equal(time.Unix(125, 0)) {
		t.Fatalf("timer at %v", at)
	}
	if f.Waiters() != 1 {
		t.Fatalf("waiters = %d, want the ticker only", f.Waiters())
	}
	if timer.Reset(time.Second) {
		t.Fatal("Reset of a fired timer reported it active")
	}
	if !timer.Stop() {
		t.Fatal("Stop of a reset timer reported it inactive")
	}
	tick.Stop()
	f.Advance(time.Minute)
	select {
	case <-tick.C():
		t.Fatal("stopped ticker fired")
	case <-timer.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if !f.Now().Equal(time.Unix(185, 0)) {
		t.Fatalf("now = %v", f.Now())
	}
}

func TestFakeTickerDropsWhenFull(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tick := f.NewTicker(time.Second)
	f.Advance(5 * time.Second) // five ticks due, one buffered, like time.Ticker
	<-tick.C()
	select {
	case <-tick.C():
		t.Fatal("a full ticker channel queued more than one tick")
	default:
	}
}

func TestOrReal(t *testing.T) {
	if _, ok := OrReal(nil).(Real); !ok {
		t.Fatal("OrReal(nil) is not the wall clock")
	}
	f := NewFake(time.Unix(0, 0))
	if OrReal(f) != Clock(f) {
		t.Fatal("OrReal replaced a given clock")
	}
}

func TestEveryRunsOnTheClockUntilCancelled(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, f, time.Second, func() { calls <- struct{}{} })
	}()
	for deadline := time.Now().Add(5 * time.Second); f.Waiters() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("Every never armed its ticker")
		}
		time.Sleep(time.Millisecond) // polling for the goroutine to arm its ticker
	}
	select {
	case <-calls:
		t.Fatal("called before the first interval")
	default:
	}
	f.Advance(time.Second)
	<-calls
	f.Advance(time.Second)
	<-calls
	cancel()
	<-done
	if f.Waiters() != 0 {
		t.Fatal("the ticker outlived Every")
	}
}

func TestFakeAfterFunc(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	var calls atomic.Int32
	at := make(chan time.Time, 1)
	timer := f.AfterFunc(10*time.Second, func() {
		calls.Add(1)
		at <- f.Now() // the clock is usable from f
	})
	if timer.C() != nil {
		t.Fatal("an AfterFunc timer has a channel")
	}
	f.Advance(9 * time.Second)
	if calls.Load() != 0 {
		t.Fatal("called before the deadline")
	}
	f.Advance(time.Second) // returns once f has returned
	if n := calls.Load(); n != 1 {
		t.Fatalf("calls after the deadline = %d, want 1", n)
	}
	if got := <-at; !got.Equal(time.Unix(10, 0)) {
		t.Fatalf("f saw now = %v", got)
	}
	f.Advance(time.Minute)
	if n := calls.Load(); n != 1 {
		t.Fatalf("calls = %d, want 1: AfterFunc fires once", n)
	}
	if timer.Stop() {
		t.Fatal("Stop of a fired AfterFunc reported it active")
	}
	if timer.Reset(time.Second) {
		t.Fatal("Reset of a fired AfterFunc reported it active")
	}
	f.Advance(time.Second)
	if n := calls.Load(); n != 2 {
		t.Fatalf("calls after Reset = %d, want 2", n)
	}
	<-at

	stopped := f.AfterFunc(time.Second, func() { t.Error("a stopped AfterFunc ran") })
	if f.Waiters() != 1 {
		t.Fatalf("waiters = %d, want the pending AfterFunc", f.Waiters())
	}
	if !stopped.Stop() {
		t.Fatal("Stop of a pending AfterFunc reported it inactive")
	}
	f.Advance(time.Hour)
}

// Functions run in their own goroutines, concurrently with Stop calls and
// other goroutines' Advance (run with -race).
func TestFakeAfterFuncConcurrent(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	var calls atomic.Int32
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			tm := f.AfterFunc(time.Duration(i%5+1)*time.Second, func() { calls.Add(1) })
			if i%2 == 0 {
				tm.Stop()
			}
		})
		wg.Go(func() { f.Advance(100 * time.Millisecond) })
	}
	wg.Wait()
	f.Advance(10 * time.Second)
	if n := calls.Load(); n < 25 || n > 50 { // a Stop may come after its deadline
		t.Fatalf("calls = %d, want the 25 never stopped and at most one a timer", n)
	}
	if f.Waiters() != 0 {
		t.Fatalf("waiters = %d after every deadline passed", f.Waiters())
	}
}

func TestRealAfterFunc(t *testing.T) {
	done := make(chan struct{})
	Real{}.AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second): // wall clock: the point is the real timer
		t.Fatal("Real.AfterFunc never called f")
	}
	if (Real{}).AfterFunc(time.Hour, func() { t.Error("a stopped AfterFunc ran") }).Stop() != true {
		t.Fatal("Stop of a pending Real.AfterFunc reported it inactive")
	}
}
