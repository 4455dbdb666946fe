package relay

import (
	"net/http"
	"time"

	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/wire"
)

// secretGuard authenticates a call made with the shared SECRET (the
// internal routes the balancer and the app's other machines call, the
// forward upgrade among them, and /metrics from the internet) under its
// source's failed-auth throttle (Server.secretThrottle, one bucket per
// source for all of them, at limit.DefaultSecretFailureRate as on the
// balancer): a throttled source is answered 429 throttled with
// Retry-After before its secret is compared; otherwise check compares it
// and the throttle decides in one step (a wrong one takes a token, a
// right one none), so concurrent guesses get no more answers than the
// burst. A wrong one is 401 unauthorized.
//
// The source is limit.Source with Options.ClientIPHeader: Fly-Client-IP
// for a call through Fly's proxy, else the TCP peer. The relay's callers
// reach it over the private network (the balancer, the other machines of
// a multi-machine app: each its own address), or, one machine per app,
// the balancer through the public address (its own egress address): none
// shares a bucket with a guesser unless it shares the address.
func (s *Server) secretGuard(w http.ResponseWriter, r *http.Request, check func(*http.Request, string) error) error {
	src := limit.Source(r, s.opts.ClientIPHeader, false)
	ok, throttled, wait := s.secretThrottle.Guard(src, func() bool { return check(r, s.opts.Secret) == nil })
	if throttled {
		return wire.Throttled(w, wait)
	}
	if !ok {
		s.refusedSecret(r, src)
		return wire.ErrUnauthorized
	}
	return nil
}

// refusedLogGap is the least time between two log lines about calls
// refused for a wrong SECRET: a balancer with a stale SECRET calls on
// every allocation, and a flood must not flood the log.
const refusedLogGap = 10 * time.Second

// refusedSecret counts a call from src refused for a wrong SECRET, and
// logs it, with how many were refused since the last line, once a gap.
func (s *Server) refusedSecret(r *http.Request, src string) {
	s.m.authFailures.Inc()
	if through, n := s.refusedLog.Note(s.clock.Now()); through {
		s.log.Warn("refused a call: wrong SECRET (does the balancer, or this app's other machines, share this relay's SECRET?)",
			"path", r.URL.Path, "source", src, "refused_since_last_line", n)
	}
}
