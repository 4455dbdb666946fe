package flysim

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/purrfly/purrfly/internal/limit"
)

// Fly's Machines API rate limits (Platform.RateLimit): per action and
// identifier (the machine, or the app for app-wide actions), one request
// a second with bursts of 3; get of a machine five a second, bursts of 10.
var (
	rateAction = limit.Rate{Every: time.Second, Burst: 3}
	rateGet    = limit.Rate{Every: 200 * time.Millisecond, Burst: 10}
)

// rateLimits are the Machines API's buckets; nil when the platform does
// not limit. Safe for concurrent use (the buckets lock themselves).
type rateLimits struct {
	get, other *limit.Buckets
}

func newRateLimits(s *Sim) *rateLimits {
	if !s.cfg.Platform.RateLimit {
		return nil
	}
	return &rateLimits{get: limit.NewBuckets(rateGet, s.clk, 0), other: limit.NewBuckets(rateAction, s.clk, 0)}
}

// allow takes a token for action on r's identifier; when there is none it
// answers 429 with Retry-After (whole seconds, rounded up) and false.
func (l *rateLimits) allow(w http.ResponseWriter, r *http.Request, action string) bool {
	if l == nil {
		return true
	}
	id := r.PathValue("id")
	if id == "" {
		id = "app:" + r.PathValue("app")
	}
	b := l.other
	if action == "get" {
		b = l.get
	}
	ok, wait := b.Allow(action + "/" + id)
	if ok {
		return true
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeFlyError(w, errf(http.StatusTooManyRequests, "rate limit exceeded: %s allows about one request a second per machine; retry after %ds", action, secs))
	return false
}
