package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/purrfly/purrfly/flyconfig"
	"github.com/purrfly/purrfly/internal/clock"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"
	"github.com/superfly/fly-go/tokens"
)

// Machines API manners: at most one request a second per action and machine
// (Fly documents about 1 req/s, burst 3), 408/429/5xx and transport errors
// retried with doubling backoff, every request bounded in time.
const (
	defaultAPIRate    = time.Second
	defaultAPIBurst   = 3
	defaultRetryBase  = 500 * time.Millisecond
	maxRetryDelay     = 8 * time.Second
	defaultAPITries   = 6
	apiRequestTimeout = 30 * time.Second
	// waitSlice is the longest single /wait long-poll (flaps caps it at 60 s).
	waitSlice = 30 * time.Second
)

// machinesAPI is the flaps client with the manners above. It is safe for
// concurrent use (the lease refresher shares it with the step).
type machinesAPI struct {
	c     *flaps.Client // static
	limit *limiter      // static; internally locked
	base  time.Duration // first retry delay; static
	tries int           // static
	clock clock.Clock   // static; nil: the real one (retry delays, lease waits and refreshes)
	// from is the base flaps builds requests on and to the one they are
	// sent to (static): errors are said with to (apinotice.go).
	from, to string
	tr       *rebase // static: the transport flaps sends through

	mu    sync.Mutex           // guards fresh
	fresh map[string]time.Time // machines this run created, by ID: when
}

// newMachinesAPI builds a flaps client for base with token. flaps reads its
// base URL only from FLY_FLAPS_BASE_URL; a transport rewrites its requests
// to base instead, so callers never need to touch the process environment.
// now is the time on a's clock.
func (a *machinesAPI) now() time.Time { return clock.OrReal(a.clock).Now() }

func newMachinesAPI(ctx context.Context, base, token string, tr http.RoundTripper, rate time.Duration, burst int, retryBase time.Duration, tries int) (*machinesAPI, error) {
	bu, err := url.Parse(base)
	if err != nil || bu.Host == "" {
		return nil, fmt.Errorf("failed to parse Machines API URL %q", base)
	}
	if tr == nil {
		tr = http.DefaultTransport
	}
	flapsBase := os.Getenv("FLY_FLAPS_BASE_URL")
	if flapsBase == "" {
		flapsBase = DefaultMachinesAPI
	}
	fu, err := url.Parse(flapsBase)
	if err != nil {
		return nil, fmt.Errorf("failed to parse FLY_FLAPS_BASE_URL: %w", err)
	}
	rb := &rebase{from: fu, to: bu, next: tr}
	c, err := flaps.NewWithOptions(ctx, flaps.NewClientOpts{
		Tokens:    tokens.Parse(token),
		Transport: rb,
		UserAgent: "purrfly-rollout",
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create Machines API client: %w", err)
	}
	if rate <= 0 {
		rate = defaultAPIRate
	}
	if burst <= 0 {
		burst = defaultAPIBurst
	}
	if retryBase <= 0 {
		retryBase = defaultRetryBase
	}
	if tries <= 0 {
		tries = defaultAPITries
	}
	// Paced a hair under Fly's rate: its buckets and ours start apart, and
	// a request a millisecond early costs a 429 and a whole second of
	// Retry-After.
	return &machinesAPI{c: c, limit: newLimiter(rate*21/20, burst), base: retryBase, tries: tries, tr: rb, fresh: map[string]time.Time{},
		from: strings.TrimRight(fu.String(), "/"), to: strings.TrimRight(bu.String(), "/")}, nil
}

// rebase sends requests meant for from (the base flaps chose) to to. It
// also keeps fly-go's retrying transport (rehttp: 502, 503 and temporary
// errors, whatever the method) from blindly sending a change again: for
// anything but GET, 502/503 become 500 and transport errors lose their
// Temporary method, so machinesAPI decides, reading the machine back
// before it resends an update.
//
// Two of Fly's manners are kept here, under every call: a 429 (the rate
// limit: nothing was done) is sent again after its Retry-After, up to
// maxRateRetries times; and a wait pinned by flaps to ?version= also
// names it as ?instance_id=, the parameter Fly's spec gives.
type rebase struct {
	from, to *url.URL
	next     http.RoundTripper
	clock    clock.Clock // nil: the real one; set before the first request
}

// Rate-limited answers: how often one request is sent again, and the
// longest Retry-After honoured (a longer one is waited for this long).
const (
	maxRateRetries = 5
	maxRetryAfter  = 30 * time.Second
)

func (r *rebase) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	u := *req.URL
	u.Scheme, u.Host = r.to.Scheme, r.to.Host
	u.Path = strings.TrimRight(r.to.Path, "/") + strings.TrimPrefix(req.URL.Path, strings.TrimRight(r.from.Path, "/"))
	u.RawPath = ""
	if req.Method == http.MethodGet && strings.HasSuffix(u.Path, "/wait") {
		q := u.Query()
		if v := q.Get("version"); v != "" && q.Get("instance_id") == "" {
			q.Set("instance_id", v)
			u.RawQuery = q.Encode()
		}
	}
	out.URL, out.Host = &u, ""
	resp, err := r.send(out)
	if req.Method == http.MethodGet {
		return resp, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: no answer: %w", req.Method, u.Path, err)
	}
	if resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable {
		resp.StatusCode, resp.Status = http.StatusInternalServerError, "500 Internal Server Error (was "+resp.Status+")"
	}
	return resp, nil
}

// send is one request, sent again after Retry-After while the Machines
// API answers 429 (at most maxRateRetries times; a body is read anew).
func (r *rebase) send(req *http.Request) (*http.Response, error) {
	for try := 0; ; try++ {
		resp, err := r.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || try >= maxRateRetries {
			return resp, err
		}
		if req.Body != nil && req.GetBody == nil {
			return resp, nil // cannot be sent again: the caller sees the 429
		}
		wait := retryAfter(resp.Header.Get("Retry-After"))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if err := clock.Sleep(req.Context(), r.clock, wait); err != nil {
			return nil, err
		}
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
	}
}

// retryAfter reads a Retry-After header (seconds, or an HTTP date) as a
// wait between a second and maxRetryAfter.
func retryAfter(v string) time.Duration {
	d := time.Second
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		d = time.Duration(min(max(n, 1), int(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	return min(max(d, time.Second), maxRetryAfter)
}

// statusOf is the HTTP status of a Machines API error, 0 for transport errors.
func statusOf(err error) int {
	var fe *flaps.FlapsError
	if errors.As(err, &fe) {
		return fe.ResponseStatusCode
	}
	return 0
}

// retryable reports whether a failed call may be sent again: 408, 429, 5xx
// and transport errors (no answer), unless ctx ended.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return false
	}
	s := statusOf(err)
	return s == 0 || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500
}

// freshFor is how long after this run created a machine a 404 for it is
// taken for Fly's eventual consistency (it is not visible everywhere yet)
// rather than for a machine that is gone.
const freshFor = time.Minute

// created records that this run created machine id just now.
func (a *machinesAPI) created(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fresh[id] = a.now()
}

// leaseAction reports whether a 404 to action means "no lease", not "no
// such machine".
func leaseAction(action string) bool {
	return action == "find_lease" || action == "release_lease" || action == "refresh_lease"
}

// madeHere reports whether this run created machine id.
func (a *machinesAPI) madeHere(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.fresh[id]
	return ok
}

// isFresh reports whether this run created machine id within freshFor.
func (a *machinesAPI) isFresh(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.fresh[id]
	return ok && a.now().Sub(at) < freshFor
}

// call runs fn (one request, bounded by timeout) within the rate limit,
// retrying retryable failures with doubling backoff; a 404 for a machine
// this run just created is retried too (not visible yet).
func (a *machinesAPI) call(ctx context.Context, action, machine string, timeout time.Duration, fn func(context.Context) error) error {
	delay := a.base
	for try := 1; ; try++ {
		if err := a.limit.wait(ctx, action+"/"+machine); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := fn(rctx)
		cancel()
		again := retryable(ctx, err) || statusOf(err) == http.StatusNotFound && ctx.Err() == nil && a.isFresh(machine) && !leaseAction(action)
		if err == nil || !again || try >= a.tries {
			return a.shown(err)
		}
		if statusOf(err) != http.StatusNotFound { // a machine just made, not visible yet, is no failure to say
			noticeRetry(ctx, action, try, a.tries, delay, a.shown(err))
		}
		if err := clock.Sleep(ctx, a.clock, delay); err != nil {
			return err
		}
		delay = min(delay*2, maxRetryDelay)
	}
}

func (a *machinesAPI) list(ctx context.Context, app string) ([]*fly.Machine, error) {
	var out []*fly.Machine
	err := a.call(ctx, "list", app, apiRequestTimeout, func(ctx context.Context) error {
		var err error
		out, err = a.c.List(ctx, app, "")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list machines of %s: %w", app, err)
	}
	return out, nil
}

func (a *machinesAPI) get(ctx context.Context, app, id string) (*fly.Machine, error) {
	var out *fly.Machine
	err := a.call(ctx, "get", id, apiRequestTimeout, func(ctx context.Context) error {
		var err error
		out, err = a.c.Get(ctx, app, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to get machine %s: %w", id, err)
	}
	return out, nil
}

// update sends the full config with the lease nonce. An update whose answer
// is lost (or that failed with a retryable status) may still have been made:
// before sending it again, the machine is read back, and a new version
// running the wanted image counts as the answer. So a retry never deploys
// twice.
func (a *machinesAPI) update(ctx context.Context, app string, m *fly.Machine, cfg *fly.MachineConfig, nonce string) (*fly.Machine, error) {
	return a.updateWith(ctx, app, m, cfg, nonce, false)
}

// updateWith is update; skip leaves the machine stopped (a standby).
func (a *machinesAPI) updateWith(ctx context.Context, app string, m *fly.Machine, cfg *fly.MachineConfig, nonce string, skip bool) (*fly.Machine, error) {
	delay := a.base
	for try := 1; ; try++ {
		if err := a.limit.wait(ctx, "update/"+m.ID); err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, apiRequestTimeout)
		out, err := a.c.Update(rctx, app, fly.LaunchMachineInput{ID: m.ID, Region: m.Region, Config: cfg, SkipLaunch: skip}, nonce)
		cancel()
		if err == nil {
			return out, nil
		}
		if !retryable(ctx, err) || try >= a.tries {
			return nil, fmt.Errorf("failed to update machine %s: %w", m.ID, err)
		}
		if cur, gerr := a.get(ctx, app, m.ID); gerr == nil && versionOf(cur) != versionOf(m) &&
			cur.Config != nil && len(flyconfig.Diff(cur.Config, cfg)) == 0 {
			return cur, nil
		}
		if err := clock.Sleep(ctx, a.clock, delay); err != nil {
			return nil, err
		}
		delay = min(delay*2, maxRetryDelay)
	}
}

// waitStarted is one /wait long-poll (at most slice, capped at waitSlice)
// for started at version, within the rate limit. It does not retry: 408
// means "not yet", and the caller reads the machine before polling again.
func (a *machinesAPI) waitStarted(ctx context.Context, app, id, version string, slice time.Duration) error {
	slice = max(min(slice, waitSlice), time.Second)
	if err := a.limit.wait(ctx, "wait/"+id); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, slice+10*time.Second)
	defer cancel()
	err := a.c.Wait(rctx, app, id, flaps.WithWaitStates("started"), flaps.WithWaitVersion(version), flaps.WithWaitTimeout(slice))
	if err != nil {
		return fmt.Errorf("failed to wait for machine %s to start: %w", id, err)
	}
	return nil
}

// copyConfig deep-copies a machine config through its JSON form.
func copyConfig(c *fly.MachineConfig) (*fly.MachineConfig, error) {
	if c == nil {
		return nil, errors.New("machine has no config")
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("failed to copy machine config: %w", err)
	}
	var out fly.MachineConfig
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("failed to copy machine config: %w", err)
	}
	return &out, nil
}

// versionOf names the machine's current version: its instance_id, which
// Fly's spec gives every version of a machine (and flyctl compares), else
// the version field some answers carry instead.
func versionOf(m *fly.Machine) string {
	if m == nil {
		return ""
	}
	return firstNonEmpty(m.InstanceID, m.Version)
}
