package balancer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// Errors of calls to relays. They stay inside the balancer: handlers answer
// the sanitized wire errors instead.
var (
	// errNotDelivered (wire.ErrNotDelivered): the request certainly did not reach the relay
	// (dial failure), so another relay may be tried.
	errNotDelivered = wire.ErrNotDelivered
	// errOutcomeUnknown: the request was sent but no complete answer came
	// back (timeout, connection lost); the relay may have committed.
	errOutcomeUnknown = wire.ErrOutcomeUnknown
)

// relayURL joins a relay endpoint and a path.
func relayURL(endpoint, path string) string {
	return strings.TrimSuffix(endpoint, "/") + path
}

// probe GETs {endpoint}/ping and returns the boot id it reports.
func (s *Server) probe(ctx context.Context, endpoint string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := s.clock.Now()
	defer func() { s.metrics.relayPing.Observe(s.clock.Now().Sub(start).Seconds()) }()
	body, err := wire.Call{Method: http.MethodGet, URL: relayURL(endpoint, "/ping"), OK: http.StatusOK}.Do(ctx, s.client)
	if err != nil {
		return "", fmt.Errorf("failed to ping the relay: %w", err)
	}
	var p wire.Ping
	if err := json.Unmarshal(body, &p); err != nil || p.BootID == "" {
		return "", errors.New("failed to read the relay's ping: no boot id")
	}
	return p.BootID, nil
}

// callAllocate POSTs PathRelayAllocate to the relay registered as boot at
// endpoint (HeaderTargetBoot says which boot was chosen, so a machine of a
// multi-machine app creates the room on itself). Its errors are
// errNotDelivered, errOutcomeUnknown, a *wire.Error the relay answered, or
// wire.ErrRelayBadAnswer for an answer that is not a RelayAllocation.
func (s *Server) callAllocate(ctx context.Context, endpoint, boot, name, region, allocationID string) (wire.RelayAllocation, error) {
	var out wire.RelayAllocation
	start := s.clock.Now()
	defer func() { s.metrics.relayAllocate.Observe(s.clock.Now().Sub(start).Seconds()) }()
	u := relayURL(endpoint, wire.PathRelayAllocate) + "?" + wire.SessionQueryParam + "=" + url.QueryEscape(wire.SessionID(name).Hint())
	body, err := s.relayCall(ctx, http.MethodPost, u, true, func(h http.Header) {
		h.Set(wire.HeaderName, name)
		h.Set(wire.HeaderRegion, region)
		h.Set(wire.HeaderAllocationID, allocationID)
		h.Set("Idempotency-Key", allocationID) // the relay replays by allocation id
		h.Set(wire.HeaderTargetBoot, boot)
	})
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, wire.ErrRelayBadAnswer
	}
	return out, nil
}

// relayCall makes one internal request to a relay (the shared secret and
// protocol version, then set's headers) within RelayTimeout, and returns
// a 200 answer's body. It is not cut short by ctx's cancellation (a
// client giving up must not turn a committed change into an unknown one).
// Its errors: errNotDelivered (the request was not written, so nothing
// happened), errOutcomeUnknown (written, and no complete answer: the relay
// may have acted), or the relay's *wire.Error.
//
// An allocation (lastAttempt) carries an Idempotency-Key, so the
// transport retries it on a fresh connection when a reused one turns out
// closed, and only that last attempt's fate counts: a placement that
// could not be dialled tries another relay, and a relay that did take the
// first attempt finds its publication refused and ends the room. Every
// other call (migration's) has no retry of the transport's: once it was
// written at all, a lost answer is an unknown outcome.
func (s *Server) relayCall(ctx context.Context, method, u string, lastAttempt bool, set func(http.Header)) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.RelayTimeout)
	defer cancel()
	return wire.Call{Method: method, URL: u, Secret: s.opts.Secret, Header: set, OK: http.StatusOK, Retryable: lastAttempt}.Do(ctx, s.client)
}
