package bench

import (
	"fmt"
	"time"
)

// Pooled latencies. With Repeat > 1 the medians of the runs' quantiles
// (Result.Relay, Result.Baseline) drop the runs in which the machine
// stalled more than usual, and a single run's p99 moves several-fold from
// run to run on a shared VM. Pooled is the other honest reading: the
// quantiles over every message of every run, each run weighted by the
// messages it carried, so a stall counts as often as players would have
// met it. The relay's round trip is pooled run by run (each run's two
// crossings convolved, then the runs mixed), so that a quiet run's
// crossings are never paired with a noisy run's.

// Pooled is the relay's round trip and the baseline's message (its own
// round trip) over every run, read and to the kernel's arrival stamps.
type Pooled struct {
	Runs                 int     `json:"runs"`
	RelayRTTP50us        float64 `json:"relay_rtt_p50_us"`
	RelayRTTP99us        float64 `json:"relay_rtt_p99_us"`
	BaselineP50us        float64 `json:"baseline_p50_us"`
	BaselineP99us        float64 `json:"baseline_p99_us"`
	RelayArrivalRTTP50us float64 `json:"relay_arrival_rtt_p50_us,omitempty"`
	RelayArrivalRTTP99us float64 `json:"relay_arrival_rtt_p99_us,omitempty"`
	BaselineArrivalP50us float64 `json:"baseline_arrival_p50_us,omitempty"`
	BaselineArrivalP99us float64 `json:"baseline_arrival_p99_us,omitempty"`
	// RatioRTTP99 and RatioArrivalRTTP99 are Result's ratios of the same
	// names over the pooled quantiles.
	RatioRTTP99        float64 `json:"ratio_rtt_p99"`
	RatioArrivalRTTP99 float64 `json:"ratio_arrival_rtt_p99,omitempty"`
}

// roundTrips are a side's round-trip latencies of one run, kept for
// pooling: the relay's two crossings convolved, the echo's messages as
// they are. Either may be nil (no stamps; one direction loaded).
type roundTrips struct {
	read, arrival *histogram
	weight        float64 // the run's messages
}

// pool returns the pooled latencies of two or more runs of each side, or
// nil and why not (nothing to say for a single run) when a run lacks
// round trips (Mode not both) or the baseline has round trips of its own
// (the forwarding mode's).
func pool(relays, baselines []*Side) (*Pooled, string) {
	if len(relays) < 2 || len(relays) != len(baselines) {
		return nil, ""
	}
	var rr, ra, br, ba []*histogram
	var rw, bw []float64
	for i := range relays {
		r, b := relays[i].trips, baselines[i].trips
		switch {
		case baselines[i].RTTP99us != 0:
			return nil, "the baseline has round trips of its own (forwarding mode): only single-run figures compare"
		case r.read == nil || b.read == nil:
			return nil, fmt.Sprintf("run %d has no round trips: they need both directions loaded (--mode both) and messages each way", i+1)
		}
		rr, br = append(rr, r.read), append(br, b.read)
		rw, bw = append(rw, r.weight), append(bw, b.weight)
		if r.arrival != nil && b.arrival != nil {
			ra, ba = append(ra, r.arrival), append(ba, b.arrival)
		}
	}
	p := &Pooled{
		Runs:          len(relays),
		RelayRTTP50us: us(mixQuantile(rr, rw, 0.5)), RelayRTTP99us: us(mixQuantile(rr, rw, 0.99)),
		BaselineP50us: us(mixQuantile(br, bw, 0.5)), BaselineP99us: us(mixQuantile(br, bw, 0.99)),
	}
	p.RatioRTTP99 = ratio(p.RelayRTTP99us, p.BaselineP99us)
	if len(ra) == len(relays) {
		p.RelayArrivalRTTP50us, p.RelayArrivalRTTP99us = us(mixQuantile(ra, rw, 0.5)), us(mixQuantile(ra, rw, 0.99))
		p.BaselineArrivalP50us, p.BaselineArrivalP99us = us(mixQuantile(ba, bw, 0.5)), us(mixQuantile(ba, bw, 0.99))
		p.RatioArrivalRTTP99 = ratio(p.RelayArrivalRTTP99us, p.BaselineArrivalP99us)
	}
	return p, ""
}

// mixQuantile is the q quantile (0..1) of the mixture of hs, the i-th
// with weight ws[i] (each histogram normalised to its own count, so a
// convolution's squared count weighs no more than a plain one), read as
// histogram.quantile reads one: the middle of the bucket it falls in. Its
// rank is the share q of the weight, where quantile's is the
// floor(q(n-1))+1-th of n samples: the two agree whenever q·n is whole,
// and otherwise differ by less than one sample.
func mixQuantile(hs []*histogram, ws []float64, q float64) time.Duration {
	var total float64
	var top int64
	for i, h := range hs {
		if h.n > 0 {
			total += ws[i]
			top = max(top, h.max)
		}
	}
	if total == 0 {
		return 0
	}
	want := q * total * (1 - 1e-12) // the sum of fractions may fall a rounding short
	var seen float64
	for b := range histPowers * histSub {
		for i, h := range hs {
			if h.n > 0 && h.counts[b] > 0 {
				seen += ws[i] * float64(h.counts[b]) / float64(h.n)
			}
		}
		if seen >= want && seen > 0 {
			hi := histLow(b + 1)
			if b+1 >= histPowers*histSub {
				hi = histLow(b)
			}
			return time.Duration(min((histLow(b)+hi)/2, top))
		}
	}
	return time.Duration(top)
}
