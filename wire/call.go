package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// The fate of an internal call that got no answer: whether the request may
// have reached the other side decides what a caller may do next (retry
// freely, or treat the outcome as unknown: host migration's
// migration_outcome_indeterminate, an allocation's pinned name).
var (
	// ErrNotDelivered: the request was certainly not written, so nothing
	// happened there.
	ErrNotDelivered = errors.New("request not delivered")
	// ErrOutcomeUnknown: the request was (or may have been) written and no
	// complete answer came: the other side may have acted.
	ErrOutcomeUnknown = errors.New("outcome unknown")
)

// Call is one internal JSON-over-HTTP request between purrfly services
// (relay to balancer, balancer to relay, relay to relay): the shared secret
// and protocol version, optional headers and JSON body, a bounded answer.
// The zero fields mean: no body, no extra header, MaxBodySize, a 2xx
// answer is success.
type Call struct {
	Method string
	URL    string
	Secret string            // "" = no internal credential (a /ping)
	Header func(http.Header) // extra headers, or nil
	Body   any               // JSON-encoded when not nil
	// MaxAnswer bounds the answer's body (default MaxBodySize); a longer
	// answer is ErrOutcomeUnknown (the other side answered; it is not
	// ours to read).
	MaxAnswer int64
	// OK is the one status that counts as success (0 = any 2xx).
	OK int
	// Retryable keeps the transport's retry of a request whose reused
	// connection turned out closed (it carries an Idempotency-Key): only
	// the last attempt's fate counts.
	Retryable bool
}

// Do sends the call with client and returns a successful answer's body.
// Its errors wrap ErrNotDelivered or ErrOutcomeUnknown when no answer
// came, or are the other side's *Error (DecodeError) for any other
// status. Errors never include the secret. ctx bounds the call.
func (c Call) Do(ctx context.Context, client *http.Client) ([]byte, error) {
	var body io.Reader
	if c.Body != nil {
		b, err := json.Marshal(c.Body)
		if err != nil {
			return nil, fmt.Errorf("%w: failed to encode the request: %w", ErrNotDelivered, err)
		}
		body = bytes.NewReader(b)
	}
	// The trace and the flag it sets in one allocation.
	t := &callTrace{}
	t.trace.WroteRequest = func(httptrace.WroteRequestInfo) { t.wrote.Store(true) }
	if c.Retryable {
		t.trace.GetConn = func(string) { t.wrote.Store(false) }
	}
	wrote := &t.wrote
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, &t.trace), c.Method, c.URL, body)
	if err != nil {
		return nil, fmt.Errorf("%w: failed to build the request: %w", ErrNotDelivered, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Secret != "" {
		SetInternal(req.Header, c.Secret)
	}
	if c.Header != nil {
		c.Header(req.Header)
	}
	resp, err := WithoutRedirects(client).Do(req)
	if err != nil {
		if wrote.Load() {
			return nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrNotDelivered, err)
	}
	defer resp.Body.Close()
	limit := c.MaxAnswer
	if limit <= 0 {
		limit = MaxBodySize
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: failed to read the answer: %w", ErrOutcomeUnknown, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: the answer is larger than %d bytes", ErrOutcomeUnknown, limit)
	}
	if c.OK != 0 && resp.StatusCode != c.OK || c.OK == 0 && resp.StatusCode/100 != 2 {
		return nil, DecodeError(resp.StatusCode, b)
	}
	return b, nil
}

// callTrace tells whether a call's request was written (the last
// attempt's, for a Retryable call).
type callTrace struct {
	trace httptrace.ClientTrace
	wrote atomic.Bool
}

// DoJSON is Do, then the answer decoded into out.
func (c Call) DoJSON(ctx context.Context, client *http.Client, out any) error {
	b, err := c.Do(ctx, client)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("failed to decode the answer: %w", err)
	}
	return nil
}
