// Package limit holds the per-source limits of the public services: token
// buckets (a rate with a burst) and concurrency counts, both keyed by a
// source (an IP address) and both bounded in memory whatever the number
// of sources, so that a flood of forged or fresh sources cannot grow them:
// past MaxKeys, sources share one overflow bucket or count. Time comes from
// an injected clock.
//
// AuthThrottle, the failed-auth throttle the relay and the balancer both
// put in front of a credential, is a bucket per source too, but only
// failures take tokens and a full table forgets its least recent failure
// instead of sharing (throttle.go). Source is the one rule for the
// address a request is counted under (source.go). Paced lets one event a
// gap through and counts the rest, for a log line about refusals
// (paced.go). Each type owns its state under its own mutex; none calls
// out while holding it.
package limit

import (
	"sync"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// DefaultMaxKeys bounds the sources a limiter tracks at once.
const DefaultMaxKeys = 65536

// overflow is the key every source shares once MaxKeys are tracked.
const overflow = "\x00overflow"

// Rate is a token bucket per source: Burst tokens, one more every Every.
// The zero Rate (or a non-positive Every) allows everything.
type Rate struct {
	Every time.Duration
	Burst int
}

// PerMinute is a Rate of n a minute with a burst of burst.
func PerMinute(n, burst int) Rate {
	if n <= 0 {
		return Rate{}
	}
	return Rate{Every: time.Minute / time.Duration(n), Burst: max(burst, 1)}
}

// Buckets limits a rate per source. Safe for concurrent use.
type Buckets struct {
	rate    Rate        // static
	clk     clock.Clock // static
	maxKeys int         // static

	mu sync.Mutex
	m  map[string]*bucket // guarded by mu
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was computed
}

// NewBuckets returns a limiter of rate per source (maxKeys 0: DefaultMaxKeys).
func NewBuckets(rate Rate, clk clock.Clock, maxKeys int) *Buckets {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &Buckets{rate: rate, clk: clock.OrReal(clk), maxKeys: maxKeys, m: make(map[string]*bucket)}
}

// Allow takes one token of key's bucket. When there is none it reports
// false and how long until there is.
func (b *Buckets) Allow(key string) (bool, time.Duration) {
	if b.rate.Every <= 0 {
		return true, 0
	}
	now := b.clk.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.slotLocked(key, now)
	if k == nil {
		k = &bucket{tokens: float64(b.rate.Burst), at: now}
		b.m[key] = k
	}
	k.tokens = min(float64(b.rate.Burst), k.tokens+float64(now.Sub(k.at))/float64(b.rate.Every))
	k.at = now
	if k.tokens >= 1 {
		k.tokens--
		return true, 0
	}
	return false, time.Duration((1 - k.tokens) * float64(b.rate.Every))
}

// slotLocked finds key's bucket, or makes room for one: full buckets (a
// source idle long enough to have refilled) are forgotten first, and with
// no room at all key shares the overflow bucket.
func (b *Buckets) slotLocked(key string, now time.Time) *bucket {
	if k := b.m[key]; k != nil || len(b.m) < b.maxKeys {
		return k
	}
	full := time.Duration(b.rate.Burst) * b.rate.Every
	for k, v := range b.m {
		if now.Sub(v.at) >= full {
			delete(b.m, k)
		}
	}
	if len(b.m) < b.maxKeys {
		return nil
	}
	k := b.m[overflow]
	if k == nil {
		for victim := range b.m { // make room for the shared bucket
			delete(b.m, victim)
			break
		}
		k = &bucket{tokens: float64(b.rate.Burst), at: now}
		b.m[overflow] = k
	}
	return k
}

// Counts bounds concurrent things (connections not yet authenticated) per
// source and in all. Safe for concurrent use.
type Counts struct {
	perKey, total int // static; 0: unbounded

	mu  sync.Mutex
	m   map[string]int // guarded by mu: keys with a count > 0
	sum int            // guarded by mu
}

// NewCounts returns a counter allowing perKey per source and total in all
// (0: no bound).
func NewCounts(perKey, total int) *Counts {
	return &Counts{perKey: perKey, total: total, m: make(map[string]int)}
}

// Acquire counts one more for key, unless a bound would be passed. The
// caller releases what it acquired.
func (c *Counts) Acquire(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total > 0 && c.sum >= c.total || c.perKey > 0 && c.m[key] >= c.perKey {
		return false
	}
	c.m[key]++
	c.sum++
	return true
}

// Release counts one less for key.
func (c *Counts) Release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[key] <= 1 {
		delete(c.m, key)
	} else {
		c.m[key]--
	}
	c.sum--
}
