package bench

import (
	"math/bits"
	"time"
)

// Histogram of latencies: log-linear buckets (histSub per power of two, so
// a quantile is off by at most 1/histSub, about 3 %). One receiver owns
// one histogram; they are merged after the run, so recording takes no
// lock and allocates nothing.
const (
	histSubBits = 5
	histSub     = 1 << histSubBits
	histPowers  = 48 // 2^48 ns is over three days
)

type histogram struct {
	counts [histPowers * histSub]uint64
	n      uint64
	max    int64
}

func histIndex(ns int64) int {
	if ns < histSub {
		if ns < 0 {
			ns = 0
		}
		return int(ns)
	}
	p := bits.Len64(uint64(ns)) - 1 // ns in [2^p, 2^(p+1))
	sub := int(uint64(ns)>>(p-histSubBits)) & (histSub - 1)
	i := (p-histSubBits+1)*histSub + sub
	return min(i, histPowers*histSub-1)
}

// histLow is the smallest value of bucket i.
func histLow(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	p := i/histSub + histSubBits - 1
	sub := i % histSub
	return int64(1)<<p | int64(sub)<<(p-histSubBits)
}

func (h *histogram) record(ns int64) {
	h.counts[histIndex(ns)]++
	h.n++
	if ns > h.max {
		h.max = ns
	}
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the value at q (0..1): the middle of its bucket.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(q*float64(h.n-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo := histLow(i)
			hi := histLow(i + 1)
			if i+1 >= len(h.counts) {
				hi = lo
			}
			return time.Duration(min((lo+hi)/2, h.max))
		}
	}
	return time.Duration(h.max)
}

// convolve returns the histogram of a + b for a drawn from h and b from o
// independently: the latency of two crossings one after the other, each
// taken at its bucket's middle.
func (h *histogram) convolve(o *histogram) *histogram {
	var sum histogram
	for i, ci := range h.counts {
		if ci == 0 {
			continue
		}
		a := (histLow(i) + histLow(i+1)) / 2
		for j, cj := range o.counts {
			if cj == 0 {
				continue
			}
			sum.counts[histIndex(a+(histLow(j)+histLow(j+1))/2)] += ci * cj
		}
	}
	sum.n = h.n * o.n
	sum.max = h.max + o.max
	return &sum
}
