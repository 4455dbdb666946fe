package balancer

import (
	"container/list"
	"sync"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/limit"
)

// authThrottle limits failed /v1 authentications per source address: a
// token bucket per source (a failure takes a token; with none left every
// request from that source is 429 throttled, whatever its credential, so a
// guess is never checked), in a table of at most max sources. Past max the
// least recently tried source is forgotten: memory stays bounded however
// many (forged) sources fail. Safe for concurrent use.
//
// A request takes its token before its credential is checked (try) and
// gives it back when the credential was right (succeeded): with the check
// first and the failure recorded after, a source's concurrent guesses
// would all pass a check made before any of them had failed, as many as
// it could keep in flight.
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

// try takes one of src's tokens for a credential about to be checked, or
// reports that src has none and how long until it has one (the request is
// then throttled unchecked). A source tried for the first time enters the
// table; a right credential gives the token back (succeeded).
func (t *authThrottle) try(src string) (bool, time.Duration) {
	if t.rate.Every <= 0 {
		return true, 0
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entryLocked(src, now)
	t.refillLocked(e, now)
	if e.tokens < 1 {
		return false, time.Duration((1 - e.tokens) * float64(t.rate.Every))
	}
	e.tokens--
	return true, 0
}

// succeeded gives back the token try took for src's right credential; a
// source whose bucket is full again leaves the table.
func (t *authThrottle) succeeded(src string) {
	if t.rate.Every <= 0 {
		return
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	el := t.m[src]
	if el == nil {
		return // forgotten meanwhile
	}
	e := el.Value.(*throttleEntry)
	t.refillLocked(e, now)
	if e.tokens = min(float64(t.rate.Burst), e.tokens+1); e.tokens >= float64(t.rate.Burst) {
		t.lru.Remove(el)
		delete(t.m, src)
	}
}

// entryLocked is src's entry, made (with a full bucket, forgetting the
// least recently tried source when the table is full) if it has none, and
// moved to the front.
func (t *authThrottle) entryLocked(src string, now time.Time) *throttleEntry {
	el := t.m[src]
	if el == nil {
		for t.lru.Len() >= t.max {
			old := t.lru.Back()
			t.lru.Remove(old)
			delete(t.m, old.Value.(*throttleEntry).src)
		}
		el = t.lru.PushFront(&throttleEntry{src: src, tokens: float64(t.rate.Burst), at: now})
		t.m[src] = el
	} else {
		t.lru.MoveToFront(el)
	}
	return el.Value.(*throttleEntry)
}

// len is how many sources are remembered.
func (t *authThrottle) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
