package clock

import (
	"context"
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
