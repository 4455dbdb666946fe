package wire

import (
	"net/http"
	"strings"
)

// CheckOperator verifies an operator's credential: the shared secret as
// "Authorization: Bearer <SECRET>" or in HeaderInternalSecret (the rollout
// tool and the admin API use it), any value of the SECRET list secret.
func CheckOperator(r *http.Request, secret string) error {
	got := r.Header.Get(HeaderInternalSecret)
	if auth := r.Header.Get("Authorization"); got == "" && len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		got = strings.TrimSpace(auth[7:])
	}
	if !SecretIn(got, secret) {
		return ErrUnauthorized
	}
	return nil
}

// PrivateOr guards a route that the private network may read freely but
// the internet may not (/metrics): a request that came through Fly's
// public proxy's HTTP handler carries Fly-Client-IP and Fly-Forwarded-Port
// (the proxy sets them; a client cannot remove them), and must then pass
// check, which answers it (an error, in the purrfly shape) or lets it
// through (nil): the services check the operator's credential
// (CheckOperator) under their failed-auth throttle. Requests over the
// private network (Fly's own metrics scraper on 6PN, another machine, a
// health check) and off Fly carry neither and are served.
//
// Only Fly's "http" handler adds these headers: a service that exposes
// the port with handlers ["tls"] alone, or none, would let the internet in
// unchallenged. The shipped fly.toml files expose it through
// http_service only.
func PrivateOr(check Handler, h http.Handler) http.Handler {
	return Handler(func(w http.ResponseWriter, r *http.Request) error {
		if r.Header.Get(HeaderFlyClientIP) != "" || r.Header.Get(HeaderFlyForwardedPort) != "" {
			if err := check(w, r); err != nil {
				return err
			}
		}
		h.ServeHTTP(w, r)
		return nil
	})
}
