package relay

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/wire"
)

// bootWatch follows the balancer's boot (wire.PathBalancerBoot), so that a
// relay registers with a restarted or redeployed balancer within about a
// second of it answering, not at its next heartbeat: a PurrNet client
// retries an allocation for about ten seconds, and a new balancer places
// rooms only on relays that have registered with it. It long-polls while
// the boot it knows answers; when the poll fails, or the balancer says it
// is stopping, it polls again after 250 ms, doubling up to a second, and
// the first answer after that (or any answer naming another boot) asks
// the registrar for a heartbeat at once. A balancer without the route (a
// 404: one from before it) ends the watch: heartbeats alone find it.
type bootWatch struct {
	url    string       // static: the route, without its query
	secret string       // static
	client *http.Client // static
	clock  clock.Clock  // static
	log    *slog.Logger // static
	wait   time.Duration
	beat   func() // static once the registrar is built (run is started after)

	mu     lockrank.Mutex
	known  string        // guarded by mu: the boot the registrar last registered with
	learnd chan struct{} // guarded by mu: closed and replaced whenever known is set
}

// Watch pacing: the long poll's hold, and the retry delays after a
// failure.
const (
	bootWatchWait = 20 * time.Second
	bootRetryMin  = 250 * time.Millisecond
	bootRetryMax  = time.Second
)

// errNoWatch: the balancer has no boot watch route.
var errNoWatch = errors.New("the balancer has no boot watch")

func newBootWatch(s *Server) *bootWatch {
	return &bootWatch{
		url:    strings.TrimRight(s.opts.BalancerURL, "/") + wire.PathBalancerBoot,
		secret: s.opts.Secret,
		client: &http.Client{Timeout: bootWatchWait + s.opts.RequestTimeout,
			Transport: &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: 2 * bootWatchWait}},
		clock:  s.clock,
		log:    s.log.With("component", "bootwatch"),
		wait:   bootWatchWait,
		mu:     lockrank.Mutex{Class: lockrank.BootWatch},
		learnd: make(chan struct{}),
	}
}

// learnt records the boot a heartbeat registered with (the registrar's
// goroutine).
func (w *bootWatch) learnt(boot string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known = boot
	close(w.learnd)
	w.learnd = make(chan struct{})
}

func (w *bootWatch) current() (string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.known, w.learnd
}

// run watches until ctx ends (the registrar's goroutine waits for it).
func (w *bootWatch) run(ctx context.Context) {
	defer w.client.CloseIdleConnections()
	failing := false
	var delay time.Duration
	for ctx.Err() == nil {
		known, learnt := w.current()
		if known == "" {
			// Not registered yet: the registrar's own retries go first.
			select {
			case <-learnt:
			case <-ctx.Done():
			}
			continue
		}
		b, err := w.poll(ctx, known)
		switch {
		case errors.Is(err, errNoWatch):
			w.log.Info("the balancer has no boot watch: a restarted balancer is found at the next heartbeat")
			return
		case err != nil || b.Draining:
			failing = true
			delay = min(max(2*delay, bootRetryMin), bootRetryMax)
			if clock.Sleep(ctx, w.clock, delay) != nil {
				return
			}
			continue
		}
		delay = 0
		if !failing && b.BalancerBoot == known {
			continue
		}
		failing = false
		w.log.Info("the balancer answers again: registering at once", "balancerBoot", b.BalancerBoot, "known", known)
		w.beat()
		// Until that heartbeat is through (or a bound), so that a poll
		// naming the old boot does not ask again and again.
		t := w.clock.NewTimer(2 * w.client.Timeout)
		select {
		case <-learnt:
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// poll is one long poll.
func (w *bootWatch) poll(ctx context.Context, known string) (wire.BalancerBoot, error) {
	var b wire.BalancerBoot
	u := w.url + "?known=" + url.QueryEscape(known) + "&wait=" + strconv.Itoa(int(w.wait/time.Second))
	err := wire.Call{Method: http.MethodGet, URL: u, Secret: w.secret}.DoJSON(ctx, w.client, &b)
	var we *wire.Error
	if errors.As(err, &we) && we.Status == http.StatusNotFound {
		return b, errNoWatch
	}
	return b, err
}
