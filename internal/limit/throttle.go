package limit

import (
	"container/list"
	"sync"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// DefaultSecretFailureRate is the failed-auth rate of a shared SECRET on
// the services' internal routes and on /metrics from the internet: ten
// wrong ones at once from one source, then one a second. Callers behind
// one address (a NAT, a shared egress) share its bucket: the short refill
// keeps one misconfigured caller, failing on a backoff and then once a
// heartbeat, from locking the others out, while a flood gets a guess a
// second.
var DefaultSecretFailureRate = Rate{Every: time.Second, Burst: 10}

// DefaultThrottleSources bounds the sources an AuthThrottle remembers.
const DefaultThrottleSources = 4096

// AuthThrottle limits failed authentications per source address (the
// balancer has two, for its /v1 admin keys and for the shared SECRET; the
// relay one, for the SECRET): a token bucket per source (a failure takes a
// token; with none left every request from that source is throttled,
// whatever its credential, so a guess is never answered), in a table of at
// most max sources. Past max the least recently failed source is
// forgotten: memory stays bounded however many (forged) sources fail.
// Safe for concurrent use.
//
// Unlike Buckets, only failures take tokens and a full table forgets its
// least recent failure rather than sharing a bucket: a shared bucket
// would let a flood of forged sources throttle every new source, right
// credentials included.
//
// The credential is compared first (in constant time), then Admit decides
// the request at once: with the throttle checked before the comparison
// and the failure recorded after it, a source's concurrent guesses would
// all pass a check made before any of them had failed, as many as it
// could keep in flight. Limited may look first, to spare a throttled
// source the comparison; Admit still decides. Guard does both in order.
type AuthThrottle struct {
	rate Rate        // static
	clk  clock.Clock // static
	max  int         // static

	mu  sync.Mutex
	m   map[string]*list.Element // guarded by mu: source -> its element in lru
	lru *list.List               // guarded by mu: *throttleEntry, most recent failure first
}

type throttleEntry struct {
	src    string
	tokens float64   // tokens left at `at`
	at     time.Time // when tokens was computed
}

// NewAuthThrottle returns a throttle of rate (a non-positive Every: no
// limit) remembering at most max sources (0: DefaultThrottleSources).
func NewAuthThrottle(rate Rate, clk clock.Clock, max int) *AuthThrottle {
	if max <= 0 {
		max = DefaultThrottleSources
	}
	return &AuthThrottle{rate: rate, clk: clock.OrReal(clk), max: max, m: make(map[string]*list.Element), lru: list.New()}
}

// tokensAt is e's tokens at now: those it had, refilled since (none for a
// clock that went back), at most the burst. The caller holds mu.
func (t *AuthThrottle) tokensAt(e *throttleEntry, now time.Time) float64 {
	return min(float64(t.rate.Burst), e.tokens+float64(max(now.Sub(e.at), 0))/float64(t.rate.Every))
}

// waitFor is how long until a source with tokens has one.
func (t *AuthThrottle) waitFor(tokens float64) time.Duration {
	return time.Duration((1 - tokens) * float64(t.rate.Every))
}

// Admit decides, in one step under the lock, a request from src whose
// credential was right or not: a source with no token left is throttled
// whatever its credential (its guess is not answered, and wait is how
// long until it has a token); otherwise a wrong credential takes a token
// (a failure) and a right one takes nothing. Deciding at once is what
// keeps guesses sent all together from being answered more often than
// the burst allows. Only failures put a source in the table.
func (t *AuthThrottle) Admit(src string, right bool) (throttled bool, wait time.Duration) {
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
	e.tokens, e.at = t.tokensAt(e, now), now
	if e.tokens < 1 {
		return true, t.waitFor(e.tokens)
	}
	if !right {
		e.tokens--
		t.lru.MoveToFront(el)
	}
	return false, 0
}

// Limited reports whether src has no token left now, and how long until
// it has one, without taking a token or remembering src: the look made
// before a credential is compared, so that a throttled source costs no
// comparison. Admit still decides every request that passes it.
func (t *AuthThrottle) Limited(src string) (throttled bool, wait time.Duration) {
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
	if tokens := t.tokensAt(el.Value.(*throttleEntry), now); tokens < 1 {
		return true, t.waitFor(tokens)
	}
	return false, 0
}

// Guard decides a request from src whose credential right compares: a
// throttled source is refused (throttled, and wait until it has a token)
// before right is called; otherwise right is called and Admit decides.
// ok is a right credential let through.
func (t *AuthThrottle) Guard(src string, right func() bool) (ok, throttled bool, wait time.Duration) {
	if throttled, wait = t.Limited(src); throttled {
		return false, true, wait
	}
	ok = right()
	if throttled, wait = t.Admit(src, ok); throttled {
		return false, true, wait
	}
	return ok, false, 0
}

// Len is how many sources are remembered.
func (t *AuthThrottle) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
