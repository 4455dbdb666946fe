package balancer

import (
	"net/http"
	"sync"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// internalAuthLogGap is the least time between two log lines about
// relay calls refused for a wrong SECRET: a relay with a stale SECRET
// retries on every heartbeat, and a flood must not flood the log.
const internalAuthLogGap = 10 * time.Second

// internalAuthLog says, at most once per internalAuthLogGap, that relay
// calls were refused for a wrong SECRET, with the last source and how
// many were refused since the last line. Safe for concurrent use.
type internalAuthLog struct {
	mu      sync.Mutex
	last    time.Time // guarded by mu: when the last line was written
	refused int       // guarded by mu: refusals since that line
}

// refusedInternal counts one refused relay call and logs it when the gap
// has passed.
func (s *Server) refusedInternal(r *http.Request) {
	s.metrics.internalAuthFailures.Inc()
	l := &s.internalAuth
	now := s.clock.Now()
	l.mu.Lock()
	l.refused++
	if !l.last.IsZero() && now.Sub(l.last) < internalAuthLogGap {
		l.mu.Unlock()
		return
	}
	n := l.refused
	l.last, l.refused = now, 0
	l.mu.Unlock()
	s.log.Warn("refused a relay call: wrong SECRET (is the relay's SECRET one the balancer accepts?)",
		"path", r.URL.Path, "source", wire.ClientIP(r, ""), "refused_since_last_line", n)
}
