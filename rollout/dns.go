package rollout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// dnsProbeTimeout bounds one look at a new app's URL. A request the proxy
// takes and holds (no machine healthy yet) counts as an answer.
const dnsProbeTimeout = 2 * time.Second

// waitDNS waits, for an app launch just gave its first public address,
// until its URL's name resolves and its proxy takes a request: Fly
// publishes a new app's name after a while (its own tools wait a minute
// and warn that it may take minutes), and nothing reaches the app's
// machines by that name before. A progress event counts down to
// Timeouts.DNS. Apps not new to this launch are not waited for.
func (r *run) waitDNS(ctx context.Context, a App) error {
	if !r.newNames[a.Name] {
		return nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, r.t.DNS.Duration, fmt.Errorf("dns wait %s passed", r.t.DNS.Duration))
	defer cancel()
	until := deadline(ctx)
	r.emit(Event{Phase: PhaseLaunch, App: a.Name, Region: a.region(), Status: StatusWaiting,
		Message: fmt.Sprintf("waiting for %s to resolve: a new app's name takes seconds to minutes to be published", a.URL)})
	for {
		why := reachable(ctx, r.hc, a.URL)
		if why == "" {
			delete(r.newNames, a.Name)
			r.emit(Event{Phase: PhaseLaunch, App: a.Name, Region: a.region(), Status: StatusDone,
				Message: a.URL + " resolves and answers"})
			return nil
		}
		r.emit(Event{Phase: PhaseLaunch, App: a.Name, Region: a.region(), Status: StatusWaiting, Wait: WaitDNS, Until: until,
			Message: fmt.Sprintf("waiting for %s to resolve and answer (%s)", a.URL, why)})
		if err := clock.Sleep(ctx, r.clock, max(r.t.Poll.Duration, 250*time.Millisecond)); err != nil {
			return failf(stepCause(ctx, err), "the name of %s (%s) did not resolve and answer (%s); new names usually do within minutes: "+
				"check `fly ips list -a %s`, then run launch again (it creates only what is missing)", a.Name, a.URL, why, a.Name)
		}
	}
}

// reachable says why appURL cannot be reached yet ("" when it can): its
// host does not resolve, or no HTTP answer came from it. Any status
// counts as an answer, and so does a request held past dnsProbeTimeout
// (Fly's proxy holds one while no machine is healthy).
func reachable(ctx context.Context, hc *http.Client, appURL string) string {
	u, err := url.Parse(appURL)
	if err != nil {
		return err.Error()
	}
	if net.ParseIP(u.Hostname()) == nil {
		if _, err := net.DefaultResolver.LookupHost(ctx, u.Hostname()); err != nil {
			return "its name does not resolve yet: " + err.Error()
		}
	}
	pctx, cancel := context.WithTimeout(ctx, dnsProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, appURL+"/ping", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := hc.Do(req)
	switch {
	case err == nil:
		_ = resp.Body.Close()
		return ""
	case ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded):
		return "" // taken and held: the name works
	}
	return "no answer: " + err.Error()
}
