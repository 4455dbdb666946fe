package rollout

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// limiter is a token bucket per key ("action/machine"): one token every
// rate, at most burst saved up. Fly rate-limits the Machines API per action
// and machine; staying under it keeps a rollout from being throttled. Get
// of a machine ("get/..." keys) is allowed five times as often and twice
// and a third the burst, as Fly allows it (5/s, bursts of 10, against 1/s
// and 3).
type limiter struct {
	rate     time.Duration // static
	burst    float64       // static
	getRate  time.Duration // static: of "get/" keys
	getBurst float64       // static
	clock    clock.Clock   // static; nil: the real one

	mu      sync.Mutex // guards buckets
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate time.Duration, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), getRate: rate / 5, getBurst: float64(burst) * 10 / 3, buckets: map[string]*bucket{}}
}

// wait takes one token for key, sleeping until one is there or ctx ends.
func (l *limiter) wait(ctx context.Context, key string) error {
	for {
		rate, burst := l.rate, l.burst
		if strings.HasPrefix(key, "get/") {
			rate, burst = l.getRate, l.getBurst
		}
		l.mu.Lock()
		now := clock.OrReal(l.clock).Now()
		b := l.buckets[key]
		if b == nil {
			b = &bucket{tokens: burst, last: now}
			l.buckets[key] = b
		}
		b.tokens = min(burst, b.tokens+float64(now.Sub(b.last))/float64(rate))
		b.last = now
		if b.tokens >= 1 {
			b.tokens--
			l.mu.Unlock()
			return nil
		}
		need := time.Duration((1 - b.tokens) * float64(rate))
		l.mu.Unlock()
		if err := clock.Sleep(ctx, l.clock, need); err != nil {
			return err
		}
	}
}
