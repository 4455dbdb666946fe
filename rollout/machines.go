package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
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
	c, err := flaps.NewWithOptions(ctx, flaps.NewClientOpts{
		Tokens:    tokens.Parse(token),
		Transport: &rebase{from: fu, to: bu, next: tr},
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
	return &machinesAPI{c: c, limit: newLimiter(rate, burst), base: retryBase, tries: tries,
		from: strings.TrimRight(fu.String(), "/"), to: strings.TrimRight(bu.String(), "/")}, nil
}

// rebase sends requests meant for from (the base flaps chose) to to. It
// also keeps fly-go's retrying transport (rehttp: 502, 503 and temporary
// errors, whatever the method) from blindly sending a change again: for
// anything but GET, 502/503 become 500 and transport errors lose their
// Temporary method, so machinesAPI decides, reading the machine back
// before it resends an update.
type rebase struct {
	from, to *url.URL
	next     http.RoundTripper
}

func (r *rebase) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	u := *req.URL
	u.Scheme, u.Host = r.to.Scheme, r.to.Host
	u.Path = strings.TrimRight(r.to.Path, "/") + strings.TrimPrefix(req.URL.Path, strings.TrimRight(r.from.Path, "/"))
	u.RawPath = ""
	out.URL, out.Host = &u, ""
	resp, err := r.next.RoundTrip(out)
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

// call runs fn (one request, bounded by timeout) within the rate limit,
// retrying retryable failures with doubling backoff.
func (a *machinesAPI) call(ctx context.Context, action, machine string, timeout time.Duration, fn func(context.Context) error) error {
	delay := a.base
	for try := 1; ; try++ {
		if err := a.limit.wait(ctx, action+"/"+machine); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := fn(rctx)
		cancel()
		if err == nil || !retryable(ctx, err) || try >= a.tries {
			return a.shown(err)
		}
		noticeRetry(ctx, action, try, a.tries, delay, a.shown(err))
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
	delay := a.base
	for try := 1; ; try++ {
		if err := a.limit.wait(ctx, "update/"+m.ID); err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, apiRequestTimeout)
		out, err := a.c.Update(rctx, app, fly.LaunchMachineInput{ID: m.ID, Region: m.Region, Config: cfg}, nonce)
		cancel()
		if err == nil {
			return out, nil
		}
		if !retryable(ctx, err) || try >= a.tries {
			return nil, fmt.Errorf("failed to update machine %s: %w", m.ID, err)
		}
		if cur, gerr := a.get(ctx, app, m.ID); gerr == nil && cur.Version != m.Version &&
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
