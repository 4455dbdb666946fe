package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The Machines API's retries are said, not silent: an operator who gave a
// wrong --machines-api, or whose network is down, sees each retry with its
// reason and the URL being tried, instead of a quiet quarter of a minute.

// retryNoticeKey carries, in a context, what to call before a retry. Only
// the rollout's own goroutine puts one there (Run); the lease refresher
// works under a context of its own and retries without a word.
type retryNoticeKey struct{}

// retryNotice is told of a failed call about to be retried.
type retryNotice func(action string, try, tries int, delay time.Duration, err error)

func withRetryNotice(ctx context.Context, n retryNotice) context.Context {
	return context.WithValue(ctx, retryNoticeKey{}, n)
}

// noticeRetry tells ctx's notice, if any, of a retry.
func noticeRetry(ctx context.Context, action string, try, tries int, delay time.Duration, err error) {
	if n, ok := ctx.Value(retryNoticeKey{}).(retryNotice); ok {
		n(action, try, tries, delay, err)
	}
}

// apiError is a Machines API call's error said with the base URL the
// operator gave: flaps builds every request on its own base
// (https://api.machines.dev unless FLY_FLAPS_BASE_URL says otherwise) and
// the rebase transport sends it elsewhere, so net/http's error names a URL
// that was never dialled.
type apiError struct {
	err      error
	from, to string // the base flaps used, the one requests went to
}

func (e *apiError) Error() string { return strings.ReplaceAll(e.err.Error(), e.from, e.to) }
func (e *apiError) Unwrap() error { return e.err }

// shown is err with the operator's base URL in its text.
func (a *machinesAPI) shown(err error) error {
	if err == nil || a.from == "" || a.from == a.to {
		return err
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return err
	}
	return &apiError{err: err, from: a.from, to: a.to}
}

// retryNotice is the run's: a progress event of the phase under way.
func (r *run) retryNotice(action string, try, tries int, delay time.Duration, err error) {
	phase := r.curPhase
	if phase == "" {
		phase = PhasePlan // nothing said yet: the plan's first reads
	}
	r.emit(Event{Phase: phase, Status: StatusWaiting, Wait: WaitMachinesAPI, Until: r.now().Add(delay),
		Message: fmt.Sprintf("the Machines API at %s failed a %s call (%v): retrying (try %d of %d)", r.api.to, action, err, try+1, tries)})
}
