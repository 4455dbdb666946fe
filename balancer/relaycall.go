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

	"github.com/purrfly/purrfly/internal/clock"
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

// relayClient makes the balancer's calls to relays: every network call
// the state's rules need (a boot proof, an allocation, a room close) and
// the migration calls the handlers forward. It holds no state of its own.
type relayClient struct {
	client  *http.Client  // static
	secret  string        // static: the shared SECRET
	timeout time.Duration // static: RelayTimeout
	clock   clock.Clock   // static
	m       *metrics      // static
}

// relayURL joins a relay endpoint and a path.
func relayURL(endpoint, path string) string {
	return strings.TrimSuffix(endpoint, "/") + path
}

// probe GETs {endpoint}/ping and returns the boot id it reports.
func (c *relayClient) probe(ctx context.Context, endpoint string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := c.clock.Now()
	defer func() { c.m.relayPing.Observe(c.clock.Now().Sub(start).Seconds()) }()
	body, err := wire.Call{Method: http.MethodGet, URL: relayURL(endpoint, "/ping"), OK: http.StatusOK}.Do(ctx, c.client)
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
func (c *relayClient) callAllocate(ctx context.Context, endpoint, boot, name, region, allocationID string) (wire.RelayAllocation, error) {
	var out wire.RelayAllocation
	start := c.clock.Now()
	defer func() { c.m.relayAllocate.Observe(c.clock.Now().Sub(start).Seconds()) }()
	// One concatenation (relayURL's and the query's would be two).
	u := strings.TrimSuffix(endpoint, "/") + wire.PathRelayAllocate + "?" + wire.SessionQueryParam + "=" + url.QueryEscape(wire.SessionID(name).Hint())
	body, err := c.call(ctx, http.MethodPost, u, true, func(h http.Header) {
		wire.SetHeaders(h,
			wire.HeaderName, name,
			wire.HeaderRegion, region,
			wire.HeaderAllocationID, allocationID,
			"Idempotency-Key", allocationID, // the relay replays by allocation id
			wire.HeaderTargetBoot, boot)
	})
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, wire.ErrRelayBadAnswer
	}
	return out, nil
}

// call makes one internal request to a relay (the shared secret and
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
func (c *relayClient) call(ctx context.Context, method, u string, lastAttempt bool, set func(http.Header)) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	return wire.Call{Method: method, URL: u, Secret: c.secret, Header: set, OK: http.StatusOK, Retryable: lastAttempt}.Do(ctx, c.client)
}

// closeRoom POSTs wire.PathRelayRoomClose for one incarnation.
func (c *relayClient) closeRoom(ctx context.Context, endpoint, name, epoch string) (wire.RelayRoomClosed, error) {
	var out wire.RelayRoomClosed
	body, err := c.call(ctx, http.MethodPost, relayURL(endpoint, wire.PathRelayRoomClose), false, func(h http.Header) {
		h.Set(wire.HeaderName, name)
		h.Set(wire.HeaderRoomEpoch, epoch)
	})
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, wire.ErrRelayBadAnswer
	}
	return out, nil
}
