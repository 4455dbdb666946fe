package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/wire"
)

// maxLocateCache bounds the cached room locations; past it the expired
// ones are dropped, and if that is not enough the cache starts over.
const maxLocateCache = 4096

// negativeLocateTTL is how long "no such room" is remembered (at most
// LocateTTL): a room is known to the balancer before anyone has its
// credentials, so this only damps repeated lookups of a bad name.
const negativeLocateTTL = 250 * time.Millisecond

// errLocateUnavailable wraps every failure to get an answer from the
// balancer (as opposed to its answer "no such room").
var errLocateUnavailable = errors.New("room location unavailable")

// errLocateBusy: the relay's own bound on lookups in flight refused one.
// Unlike a balancer that does not answer, it is not worth waiting out.
var errLocateBusy = fmt.Errorf("%w: too many lookups in flight", errLocateUnavailable)

// errLocateRefused: the balancer refused the relay's credential (a stale
// SECRET, or its address throttled for failed ones); asking again at once
// would fail again and spend the address's failed-auth budget.
var errLocateRefused = fmt.Errorf("%w: the balancer refused the credential", errLocateUnavailable)

// locator asks the balancer which machine holds a room
// (wire.PathRoomLocation) and caches the answers briefly. Concurrent
// lookups of one room share one request. It never holds its lock across
// I/O.
type locator struct {
	base    string        // static: balancer base URL, no trailing slash
	secret  string        // static
	client  *http.Client  // static
	clock   clock.Clock   // static
	ttl     time.Duration // static
	timeout time.Duration // static: per request
	m       *meshMetrics  // static

	sf    singleflight.Group
	slots chan struct{} // static: bounds lookups in flight (maxLocateInflight)

	mu    lockrank.Mutex
	cache map[string]locEntry // guarded by mu
}

type locEntry struct {
	loc   wire.RoomLocation
	found bool
	until time.Time
}

// locate returns where room lives (ctx is the relay's life): found is false when the balancer says
// no live room has that name. An error means the balancer could not be
// asked (it wraps errLocateUnavailable). A lookup is bounded by the
// locator's timeout and shared by every concurrent caller for the room (on
// the caller's goroutine: no goroutine outlives it).
func (l *locator) locate(ctx context.Context, room string) (loc wire.RoomLocation, found bool, err error) {
	now := l.clock.Now()
	l.mu.Lock()
	e, ok := l.cache[room]
	l.mu.Unlock()
	if ok && now.Before(e.until) {
		l.m.lookups.WithLabelValues("cached").Inc()
		return e.loc, e.found, nil
	}
	v, err, _ := l.sf.Do(room, func() (any, error) { return l.fetch(ctx, room) })
	if err != nil {
		return wire.RoomLocation{}, false, err
	}
	e = v.(locEntry)
	return e.loc, e.found, nil
}

// forget drops room's cached location (its holder turned out unreachable).
func (l *locator) forget(room string) {
	l.mu.Lock()
	delete(l.cache, room)
	l.mu.Unlock()
}

// maxLocateInflight bounds concurrent lookups at the balancer. Lookups are
// triggered by unauthenticated upgrades (any ?s= hint) and first messages,
// so past this the relay answers as if the balancer were unreachable
// (hash routing, or serve here) instead of flooding it.
const maxLocateInflight = 32

// fetch asks the balancer once and caches the answer. It is bounded by the
// locator's timeout, by the relay's life and by maxLocateInflight.
func (l *locator) fetch(ctx context.Context, room string) (locEntry, error) {
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
			defer func() { <-l.slots }()
		default:
			l.m.lookups.WithLabelValues("busy").Inc()
			return locEntry{}, errLocateBusy
		}
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	start := l.clock.Now()
	e, err := l.get(ctx, room)
	result := "found"
	switch {
	case err != nil:
		result = "error"
	case !e.found:
		result = "not_found"
	}
	l.m.lookups.WithLabelValues(result).Inc()
	l.m.lookupSeconds.Observe(l.clock.Now().Sub(start).Seconds())
	if err != nil {
		return e, err
	}
	ttl := l.ttl
	if !e.found {
		ttl = min(ttl, negativeLocateTTL)
	}
	e.until = l.clock.Now().Add(ttl)
	l.mu.Lock()
	if len(l.cache) >= maxLocateCache {
		now := l.clock.Now()
		for k, v := range l.cache {
			if !now.Before(v.until) {
				delete(l.cache, k)
			}
		}
		if len(l.cache) >= maxLocateCache {
			clear(l.cache)
		}
	}
	l.cache[room] = e
	l.mu.Unlock()
	return e, nil
}

func (l *locator) get(ctx context.Context, room string) (locEntry, error) {
	u := l.base + wire.PathRoomLocation + "?name=" + url.QueryEscape(room)
	body, err := wire.Call{Method: http.MethodGet, URL: u, Secret: l.secret, MaxAnswer: 64 << 10, OK: http.StatusOK}.Do(ctx, l.client)
	var we *wire.Error
	switch {
	case errors.Is(err, wire.ErrRoomNotFound):
		return locEntry{}, nil
	case errors.Is(err, wire.ErrUnauthorized) || errors.Is(err, wire.ErrThrottled):
		return locEntry{}, fmt.Errorf("%w: %w", errLocateRefused, err)
	case errors.As(err, &we):
		return locEntry{}, fmt.Errorf("%w: the balancer refused: %w", errLocateUnavailable, err)
	case err != nil:
		return locEntry{}, fmt.Errorf("%w: failed to ask the balancer: %w", errLocateUnavailable, err)
	}
	var loc wire.RoomLocation
	if err := json.Unmarshal(body, &loc); err != nil || loc.BootID == "" || loc.Name != room {
		return locEntry{}, fmt.Errorf("%w: the balancer answered a malformed location", errLocateUnavailable)
	}
	loc.Endpoint = strings.TrimRight(loc.Endpoint, "/")
	return locEntry{loc: loc, found: true}, nil
}
