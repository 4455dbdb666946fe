package bench

import (
	"context"
	"testing"
	"time"
)

// TestConnectionSoak runs a small connection soak (three rounds of 600
// connections, a one-second authentication and header timeout) against a
// relay child: every kind of connection is opened, every player plays,
// every connection the relay must close is closed within its bound, and
// the relay's goroutines and open files come back to the first round's
// level after every round.
func TestConnectionSoak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n, rounds = 600, 3
	res, err := Run(ctx, childOptions(Options{Soak: n, Rounds: rounds, SoakTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	s := res.Soak
	if s == nil || len(s.Round) != rounds {
		t.Fatalf("soak result: %+v", s)
	}
	for i, r := range s.Round {
		t.Logf("round %d: %+v", i+1, r)
		for _, k := range []string{kindHost, kindPlayer, kindDeaf, kindUnauthed, kindSilent, kindSlowloris} {
			if r.Opened[k] == 0 {
				t.Errorf("round %d opened no %s connection", i+1, k)
			}
		}
		if r.Played != r.Opened[kindPlayer] {
			t.Errorf("round %d: %d of %d players played", i+1, r.Played, r.Opened[kindPlayer])
		}
		if must := r.Opened[kindUnauthed] + r.Opened[kindSilent] + r.Opened[kindSlowloris]; r.ClosedByRelay != must {
			t.Errorf("round %d: the relay closed %d of the %d connections it must close", i+1, r.ClosedByRelay, must)
		}
		if r.MaxCloseSec < s.TimeoutSec*0.9 {
			t.Errorf("round %d: the relay closed a connection after %.3fs, before its %gs timeout", i+1, r.MaxCloseSec, s.TimeoutSec)
		}
	}
	t.Logf("before %+v, settled %+v", s.Before, s.Settled)
	if !s.Clean() || s.Refused != 0 {
		t.Fatalf("soak not clean: growth %d goroutines, %d fds; %d not closed, %d errors, %d refused (first: %q)",
			s.GoroutineGrowth, s.FDGrowth, s.NotClosed, s.Errors, s.Refused, s.Round[0].FirstError)
	}
}
