package bench

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestMixQuantile: runs mix by their weights, not by their counts: a run
// of 1 ms messages and one of 10 ms messages, weighted 3 to 1, have their
// median at 1 ms and their p90 at 10 ms, however many samples each
// histogram holds (a convolution holds the square of its messages).
func TestMixQuantile(t *testing.T) {
	var fast, slow histogram
	for range 4 {
		fast.record(int64(time.Millisecond))
	}
	for range 1000 {
		slow.record(int64(10 * time.Millisecond))
	}
	near := func(got, want time.Duration) bool {
		d := float64(got-want) / float64(want)
		return d > -0.035 && d < 0.035
	}
	hs, ws := []*histogram{&fast, &slow}, []float64{3, 1}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, time.Millisecond}, {0.74, time.Millisecond}, {0.76, 10 * time.Millisecond}, {0.9, 10 * time.Millisecond}, {1, 10 * time.Millisecond}} {
		if got := mixQuantile(hs, ws, c.q); !near(got, c.want) {
			t.Errorf("q%v = %v, want %v", c.q, got, c.want)
		}
	}
	// One run alone reads as its own quantile, to the bucket's middle.
	var spread histogram
	for i := range int64(1000) {
		spread.record(1000 + i*i*37)
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		if got, want := mixQuantile([]*histogram{&spread}, []float64{7}, q), spread.quantile(q); got != want {
			t.Errorf("one run's q%v = %v, want its own %v", q, got, want)
		}
	}
	var empty histogram
	if got := mixQuantile([]*histogram{&empty}, []float64{5}, 0.5); got != 0 {
		t.Errorf("empty mixture = %v", got)
	}
	if got := mixQuantile([]*histogram{&empty, &fast}, []float64{5, 1}, 0.99); !near(got, time.Millisecond) {
		t.Errorf("an empty run weighs nothing: %v", got)
	}
}

// TestMixQuantileBetweenRuns: a pooled quantile lies between the runs'
// own (within a bucket), whatever their shapes and weights.
func TestMixQuantileBetweenRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var hs []*histogram
		var ws []float64
		for range 2 + rng.IntN(4) {
			h := &histogram{}
			scale := int64(1000 + rng.IntN(1_000_000))
			for range 1000 + rng.IntN(2000) { // enough that quantile's rank and a fraction agree
				h.record(scale + rng.Int64N(scale*(1+rng.Int64N(20))))
			}
			hs, ws = append(hs, h), append(ws, 1+rng.Float64()*100)
		}
		for _, q := range []float64{0.5, 0.9, 0.99} {
			lo, hi := time.Duration(1<<62), time.Duration(0)
			for _, h := range hs {
				lo, hi = min(lo, h.quantile(q)), max(hi, h.quantile(q))
			}
			if got := mixQuantile(hs, ws, q); got < lo*96/100 || got > hi*104/100 {
				t.Fatalf("trial %d q%v: pooled %v outside the runs' %v..%v", trial, q, got, lo, hi)
			}
		}
	}
}

// TestPoolNeedsRoundTrips: no pooled figures from one run, from runs
// without round trips, or from a baseline that has round trips of its own
// (the forwarding mode's direct run).
func TestPoolNeedsRoundTrips(t *testing.T) {
	var h histogram
	h.record(1000)
	side := func(rtt float64, trips roundTrips) *Side { return &Side{RTTP99us: rtt, trips: trips} }
	relay := side(2, roundTrips{read: &h, weight: 1})
	echo := side(0, roundTrips{read: &h, weight: 1})
	if p, why := pool([]*Side{relay}, []*Side{echo}); p != nil || why != "" {
		t.Errorf("one run: pooled %v, %q", p, why)
	}
	if p, why := pool([]*Side{relay, side(0, roundTrips{})}, []*Side{echo, echo}); p != nil || !strings.Contains(why, "run 2 has no round trips") {
		t.Errorf("a run without round trips: pooled %v, %q", p, why)
	}
	if p, why := pool([]*Side{relay, relay}, []*Side{relay, relay}); p != nil || !strings.Contains(why, "forwarding mode") {
		t.Errorf("against a baseline with round trips: pooled %v, %q", p, why)
	}
	p, why := pool([]*Side{relay, relay}, []*Side{echo, echo})
	if p == nil || why != "" || p.Runs != 2 || p.RatioRTTP99 != 1 || p.RatioArrivalRTTP99 != 0 {
		t.Errorf("pooled %+v (%q), want 2 runs, ratio 1, no arrival figures", p, why)
	}
}

// TestSummarizeKeepsRoundTrips: a run keeps what pooling needs: the
// echo's messages as its round trips, the relay's two crossings
// convolved, each weighted by the run's messages.
func TestSummarizeKeepsRoundTrips(t *testing.T) {
	rec := func(crossing int, msgs int64, ns ...int64) *receiver {
		r := &receiver{crossing: crossing, msgs: msgs}
		for _, v := range ns {
			r.h.record(v)
			r.ha.record(v / 2)
		}
		return r
	}
	var echo Side
	(&traffic{recvs: []*receiver{rec(crossingEcho, 3, 1000, 2000, 3000)}}).summarize(&echo)
	if tr := echo.trips; tr.weight != 3 || tr.read == nil || tr.read.n != 3 || tr.arrival == nil || tr.arrival.n != 3 {
		t.Errorf("echo keeps %+v, want 3 messages read and stamped, weight 3", tr)
	}
	var relay Side
	(&traffic{recvs: []*receiver{rec(crossingToHost, 2, 1000, 2000), rec(crossingToClient, 3, 10, 20, 30)}}).summarize(&relay)
	if tr := relay.trips; tr.weight != 5 || tr.read == nil || tr.read.n != 6 || tr.arrival == nil || tr.arrival.n != 6 {
		t.Errorf("relay keeps %+v, want the 2x3 convolution read and stamped, weight 5", tr)
	}
	if got := relay.trips.read.quantile(1); got != 2030 {
		t.Errorf("relay round trip max %v, want 2030ns (the two crossings' maxima)", got)
	}
}
