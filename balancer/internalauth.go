package balancer

import (
	"net/http"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// internalAuthLogGap is the least time between two log lines about
// calls refused for a wrong SECRET: a relay with a stale SECRET retries
// on every heartbeat, and a flood must not flood the log.
const internalAuthLogGap = 10 * time.Second

// secretGuard authenticates a call made with the shared SECRET (the
// internal routes relays and the standby call, and /metrics from the
// internet), check (wire.CheckInternal or wire.CheckOperator) telling
// whether r carries it, under its source's failed-auth throttle
// (Server.secretThrottle, Options.SecretFailureRate):
// a throttled source is answered 429 throttled with Retry-After before its
// secret is compared; otherwise the secret is compared and the throttle
// decides in one step (a wrong one takes a token, a right one none), as
// on /v1. A refusal is 401 unauthorized, counted and logged (paced).
//
// The source is adminSource's: Fly-Client-IP on Fly (relays register
// through the app's public address), the proxy's last X-Forwarded-For
// hop with TrustProxy, else the TCP peer. Relays behind one address share
// a bucket, so the default rate refills within a second: a relay whose
// SECRET is refused sends only heartbeats, on a doubling backoff (it holds
// publications and removals, and does not repeat a refused look-up), so
// one alone does not empty it; several, or a flood, lock the others out
// only while they last, a second at a time.
func (s *Server) secretGuard(w http.ResponseWriter, r *http.Request, check func(*http.Request, string) error) error {
	src := s.adminSource(r)
	ok, limited, wait := s.secretThrottle.Guard(src, func() bool { return check(r, s.opts.Secret) == nil })
	if limited {
		return wire.Throttled(w, wait)
	}
	if !ok {
		s.refusedSecret(r, src)
		return wire.ErrUnauthorized
	}
	return nil
}

// refusedSecret counts one call from src refused for a wrong SECRET and
// logs it when the gap has passed.
func (s *Server) refusedSecret(r *http.Request, src string) {
	s.metrics.internalAuthFailures.Inc()
	through, n := s.internalAuth.Note(s.clock.Now())
	if !through {
		return
	}
	s.log.Warn("refused a call: wrong SECRET (is the relay's or the scraper's SECRET one the balancer accepts?)",
		"path", r.URL.Path, "source", src, "refused_since_last_line", n)
}
