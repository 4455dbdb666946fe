package balancer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// Errors of calls to relays. They stay inside the balancer: handlers answer
// the sanitized wire errors instead.
var (
	// errNotDelivered: the request certainly did not reach the relay
	// (dial failure), so another relay may be tried.
	errNotDelivered = errors.New("request not delivered")
	// errOutcomeUnknown: the request was sent but no complete answer came
	// back (timeout, connection lost); the relay may have committed.
	errOutcomeUnknown = errors.New("relay outcome unknown")
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, relayURL(endpoint, "/ping"), nil)
	if err != nil {
		return "", fmt.Errorf("failed to build the ping request: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("failed to ping the relay: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxBodySize))
	if err != nil {
		return "", fmt.Errorf("failed to read the relay's ping: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("failed to ping the relay: status %d", resp.StatusCode)
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
	// The client may give up; the relay call must not be cut short by that,
	// or a committed room would become indeterminate for no reason.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.RelayTimeout)
	defer cancel()
	start := s.clock.Now()
	defer func() { s.metrics.relayAllocate.Observe(s.clock.Now().Sub(start).Seconds()) }()

	// wrote tells whether the last attempt was written. The transport may
	// retry on a fresh connection when a reused one turns out closed (the
	// request is marked idempotent below: the relay replays by allocation
	// id), so every new attempt resets it.
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn:      func(string) { wrote.Store(false) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	u := relayURL(endpoint, wire.PathRelayAllocate) + "?" + wire.SessionQueryParam + "=" + url.QueryEscape(wire.SessionID(name).Hint())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return out, errNotDelivered
	}
	h := req.Header
	h.Set(wire.HeaderName, name)
	h.Set(wire.HeaderRegion, region)
	h.Set(wire.HeaderAllocationID, allocationID)
	wire.SetInternal(h, s.opts.Secret)
	h.Set("Idempotency-Key", allocationID)
	h.Set(wire.HeaderTargetBoot, boot)

	resp, err := s.client.Do(req)
	if err != nil {
		if wrote.Load() {
			return out, errOutcomeUnknown
		}
		return out, errNotDelivered
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxBodySize))
	if err != nil {
		return out, errOutcomeUnknown
	}
	if resp.StatusCode != http.StatusOK {
		return out, wire.DecodeError(resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, wire.ErrRelayBadAnswer
	}
	return out, nil
}
