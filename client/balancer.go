package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// DefaultRequestTimeout bounds every balancer request, as PurrNet's
// request.timeout = 10 does.
const DefaultRequestTimeout = 10 * time.Second

// MaxResponseSize bounds the answer body the client reads from any request.
const MaxResponseSize = 1 << 20

// ErrResponseTooLarge is returned when an answer exceeds MaxResponseSize.
var ErrResponseTooLarge = errors.New("answer larger than 1 MiB")

// Balancer calls the public HTTP API of a balancer (or of a relay, for /ping).
// Set the fields before the first call and never change them after; then a
// Balancer is safe for concurrent use.
type Balancer struct {
	// BaseURL is the balancer's base URL (PurrTransport's "master server").
	// A missing trailing slash is added, as PurrNet does.
	BaseURL string
	// HTTP is the client requests go through; nil means http.DefaultClient.
	HTTP *http.Client
	// Timeout bounds each request; zero means DefaultRequestTimeout.
	Timeout time.Duration
	// Header holds extra headers sent with every request (for example
	// fly-force-instance-id). Never put a header named by this API here.
	Header http.Header
}

// NewBalancer returns a Balancer for baseURL with default settings.
func NewBalancer(baseURL string) *Balancer { return &Balancer{BaseURL: baseURL} }

// WithHeader returns a copy of b that also sends header key: value.
func (b *Balancer) WithHeader(key, value string) *Balancer {
	c := *b
	c.Header = b.Header.Clone()
	if c.Header == nil {
		c.Header = http.Header{}
	}
	c.Header.Set(key, value)
	return &c
}

// Servers lists the registered relays (GET /servers, step 1 of PurrNet).
func (b *Balancer) Servers(ctx context.Context) ([]wire.ServerInfo, error) {
	var out wire.ServersResponse
	if err := b.do(ctx, http.MethodGet, b.route("servers"), nil, &out); err != nil {
		return nil, fmt.Errorf("failed to list relays: %w", err)
	}
	return out.Servers, nil
}

// Ping calls GET {endpoint}/ping and times the round trip, as PurrNet does to
// pick the fastest relay. endpoint is a relay's apiEndpoint or a balancer's
// base URL. A 2xx answer whose body is not purrfly's Ping JSON (an original
// PurrLay relay) gives a zero Ping and no error: only the timing is PurrNet's
// contract; callers that need the boot id check Ping.BootID.
func (b *Balancer) Ping(ctx context.Context, endpoint string) (wire.Ping, time.Duration, error) {
	var raw json.RawMessage
	start := time.Now()
	err := b.do(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+"/ping", nil, &raw)
	rtt := time.Since(start)
	if err != nil && !errors.Is(err, errNotJSON) {
		return wire.Ping{}, rtt, fmt.Errorf("failed to ping %s: %w", endpoint, err)
	}
	var p wire.Ping
	if len(raw) > 0 && json.Unmarshal(raw, &p) != nil {
		p = wire.Ping{}
	}
	return p, rtt, nil
}

// Ready reads a relay's readiness (wire.PathReady) at endpoint: the
// Readiness of a ready relay, or the relay's own *wire.Error (not_ready,
// whose message says why) or a transport error.
func (b *Balancer) Ready(ctx context.Context, endpoint string) (wire.Readiness, error) {
	var r wire.Readiness
	err := b.do(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+wire.PathReady, nil, &r)
	return r, err
}

// Fastest pings every relay of servers at once and returns the one that
// answered first (PurrNet's region choice). Relays that fail are skipped; an
// error is returned only when none answers.
func (b *Balancer) Fastest(ctx context.Context, servers []wire.ServerInfo) (wire.ServerInfo, time.Duration, error) {
	type result struct {
		i   int
		rtt time.Duration
		err error
	}
	ch := make(chan result, len(servers))
	for i, s := range servers {
		go func() {
			_, rtt, err := b.Ping(ctx, s.APIEndpoint)
			ch <- result{i, rtt, err}
		}()
	}
	best, bestRTT := -1, time.Duration(0)
	var lastErr error
	for range servers {
		r := <-ch
		if r.err != nil {
			lastErr = r.err
			continue
		}
		if best < 0 || r.rtt < bestRTT {
			best, bestRTT = r.i, r.rtt
		}
	}
	if best < 0 {
		if lastErr == nil {
			lastErr = errors.New("no relay listed")
		}
		return wire.ServerInfo{}, 0, fmt.Errorf("failed to ping any relay: %w", lastErr)
	}
	return servers[best], bestRTT, nil
}

// Allocate asks for a room as a new PurrNet host does: POST /allocate_ws with
// an empty body and headers region, name and allocation_id. Reusing the same
// allocationID replays the same allocation (see NewAllocationID and Retry).
// The answer is validated as PurrNet validates it.
func (b *Balancer) Allocate(ctx context.Context, region, name, allocationID string) (wire.Capability, error) {
	h := [][2]string{{wire.HeaderRegion, region}, {wire.HeaderName, name}, {wire.HeaderAllocationID, allocationID}}
	var c wire.Capability
	if err := b.do(ctx, http.MethodPost, b.route("allocate_ws"), h, &c); err != nil {
		return wire.Capability{}, fmt.Errorf("failed to allocate room: %w", err)
	}
	if err := ValidateCapability(c); err != nil {
		return wire.Capability{}, fmt.Errorf("failed to allocate room: %w", err)
	}
	return c, nil
}

// AllocateLegacy asks for a room as an older PurrNet host does: GET
// /allocate_ws with headers region and name only. Older answers may lack
// host (those clients take it from /servers): the capability is returned
// with Host empty then, for the caller to fill in; everything else is
// validated.
func (b *Balancer) AllocateLegacy(ctx context.Context, region, name string) (wire.Capability, error) {
	h := [][2]string{{wire.HeaderRegion, region}, {wire.HeaderName, name}}
	var c wire.Capability
	if err := b.do(ctx, http.MethodGet, b.route("allocate_ws"), h, &c); err != nil {
		return wire.Capability{}, fmt.Errorf("failed to allocate room (legacy): %w", err)
	}
	check := c
	if strings.TrimSpace(check.Host) == "" {
		check.Host = "host.invalid"
	}
	if err := ValidateCapability(check); err != nil {
		return wire.Capability{}, fmt.Errorf("failed to allocate room (legacy): %w", err)
	}
	return c, nil
}

// Join asks for a client capability to room name (GET /join, header name).
func (b *Balancer) Join(ctx context.Context, name string) (wire.Capability, error) {
	var c wire.Capability
	if err := b.do(ctx, http.MethodGet, b.route("join"), [][2]string{{wire.HeaderName, name}}, &c); err != nil {
		return wire.Capability{}, fmt.Errorf("failed to join room: %w", err)
	}
	if err := ValidateCapability(c); err != nil {
		return wire.Capability{}, fmt.Errorf("failed to join room: %w", err)
	}
	return c, nil
}

// List returns one page of rooms (GET /list?page=N, pages count from 0,
// wire.ListPageSize rooms a page).
func (b *Balancer) List(ctx context.Context, page int) (wire.ListResponse, error) {
	var out wire.ListResponse
	if err := b.do(ctx, http.MethodGet, b.route("list?page="+strconv.Itoa(page)), nil, &out); err != nil {
		return wire.ListResponse{}, fmt.Errorf("failed to list rooms: %w", err)
	}
	return out, nil
}

// TotalConnections returns the balancer's connection count
// (GET /getTotalConnections).
func (b *Balancer) TotalConnections(ctx context.Context) (int, error) {
	var out wire.TotalConnections
	if err := b.do(ctx, http.MethodGet, b.route("getTotalConnections"), nil, &out); err != nil {
		return 0, fmt.Errorf("failed to count connections: %w", err)
	}
	return out.TotalConnections, nil
}

// ValidateCapability checks a capability as PurrNet does before using it:
// host and secret neither empty nor blank, port and udpPortV2 in 1..65535
// (wire.Capability.Validate), and a host that forms a valid URL authority.
func ValidateCapability(c wire.Capability) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if strings.TrimSpace(c.Secret) == "" {
		return wire.ErrRelayBadAnswer.WithMessage("relay capability has no usable credential")
	}
	if _, err := RelayURL(c); err != nil {
		return wire.ErrRelayBadAnswer.WithMessage("relay capability has no usable host")
	}
	return nil
}

func (b *Balancer) route(path string) string {
	base := b.BaseURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	return base + path
}

// errNotJSON marks a 2xx answer whose body did not decode; Ping tolerates it.
var errNotJSON = errors.New("answer is not the expected JSON")

// do sends one request with PurrNet's headers and decodes the JSON answer into
// out. Headers in h are written with their names exactly as given (PurrNet
// sends lower-case names with underscores).
func (b *Balancer) do(ctx context.Context, method, rawURL string, h [][2]string, out any) error {
	u, ok := wire.ParseHTTPURL(rawURL)
	if !ok {
		return fmt.Errorf("invalid URL %q: want http(s)://host[:port]", redactURL(rawURL))
	}
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return fmt.Errorf("failed to build request: %w", err)
	}
	for k, v := range b.Header {
		req.Header[k] = v
	}
	req.Header.Set("Cache-Control", "no-cache")
	for _, kv := range h {
		req.Header[kv[0]] = []string{kv[1]}
	}
	resp, err := wire.WithoutRedirects(b.HTTP).Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	if err != nil {
		return fmt.Errorf("failed to read answer of %s %s: %w", method, u.Path, err)
	}
	if len(body) > MaxResponseSize {
		return fmt.Errorf("%s %s: %w", method, u.Path, ErrResponseTooLarge)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return wire.DecodeError(resp.StatusCode, body)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		if !json.Valid(bytes.TrimSpace(body)) {
			return errNotJSON
		}
		*raw = append((*raw)[:0], body...)
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("failed to decode answer of %s %s: %w", method, u.Path, err)
	}
	return nil
}

// redactURL drops userinfo and query from a URL for error messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}
