package balancer

import (
	"container/list"
	"sync"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/limit"
)

// authThrottle limits failed authentications per source address (the
// server has two: one for the /v1 admin keys, one for the shared SECRET on
// the internal routes and /metrics, internalauth.go): a token bucket per
// source (a failure takes a token; with none left every request from that
// source is 429 throttled, whatever its credential, so a guess is never
// answered), in a table of at most max sources. Past max the least
// recently failed source is forgotten: memory stays bounded however many
// (forged) sources fail. Safe for concurrent use.
//
// The credential is compared first (in constant time), then admit decides
// the request at once: with the throttle checked before the comparison
// and the failure recorded after it, a source's concurrent guesses would
// all pass a check made before any of them had failed, as many as it
// could keep in flight. limited may look first, to spare a throttled
// source the comparison; admit still decides.
type authThrottle struct {
	rate limit.Rate // static
	clk  clock.Clock
	max  int // static

	mu  sync.Mutex
	m   map[string]*list.Element // guarded by mu: source -> its element in lru
	lru *list.List               // guarded by mu: *throttleEntry, most recent failure first
}

type throttleEntry struct {
	src    string
	tokens float64   // tokens left at `at`
	at     time.Time // when tokens was computed
}

func newAuthThrottle(rate limit.Rate, clk clock.Clock, max int) *authThrottle {
	return &authThrottle{rate: rate, clk: clk, max: max, m: make(map[string]*list.Element), lru: list.New()}
}

// refillLocked brings e's tokens up to now.
func (t *authThrottle) refillLocked(e *throttleEntry, now time.Time) {
	e.tokens = min(float64(t.rate.Burst), e.tokens+float64(now.Sub(e.at))/float64(t.rate.Every))
	e.at = now
}

// admit decides, in one step under the lock, a /v1 request from src whose
// credential was right or not: a source with no token left is throttled
// whatever its credential (its guess is not answered, and wait is how
// long until it has a token); otherwise a wrong credential takes a token
// (a failure) and a right one takes nothing. Deciding at once is what
// keeps guesses sent all together from being answered more often than
// the burst allows. Only failures put a source in the table.
func (t *authThrottle) admit(src string, right bool) (throttled bool, wait time.Duration) {
	if t.rate.Every <= 0 {
		return false, 0
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	el := t.m[src]
	if el == nil {
		if right {
			return false, 0
		}
		for t.lru.Len() >= t.max {
			old := t.lru.Back()
			t.lru.Remove(old)
			delete(t.m, old.Value.(*throttleEntry).src)
		}
		el = t.lru.PushFront(&throttleEntry{src: src, tokens: float64(t.rate.Burst), at: now})
		t.m[src] = el
	}
	e := el.Value.(*throttleEntry)
	t.refillLocked(e, now)
	if e.tokens < 1 {
		return true, time.Duration((1 - e.tokens) * float64(t.rate.Every))
	}
	if !right {
		e.tokens--
		t.lru.MoveToFront(el)
	}
	return false, 0
}

// limited reports whether src has no token left now, and how long until
// it has one, without taking a token or remembering src: the look made
// before a credential is compared, so that a throttled source costs no
// comparison. admit still decides every request that passes it.
func (t *authThrottle) limited(src string) (throttled bool, wait time.Duration) {
	if t.rate.Every <= 0 {
		return false, 0
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	el := t.m[src]
	if el == nil {
		return false, 0
	}
	e := el.Value.(*throttleEntry)
	tokens := min(float64(t.rate.Burst), e.tokens+float64(max(now.Sub(e.at), 0))/float64(t.rate.Every))
	if tokens < 1 {
		return true, time.Duration((1 - tokens) * float64(t.rate.Every))
	}
	return false, 0
}

// len is how many sources are remembered.
func (t *authThrottle) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
