package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// maxPerRequest bounds the rooms of one incremental publish or unregister
// request (the balancer caps bodies at wire.MaxBodySize).
const maxPerRequest = 500

// registrar keeps this relay registered with the balancer: heartbeat,
// snapshot republication, prompt count updates, and the unregister outbox.
// Everything that talks to the balancer runs on its one goroutine (run);
// connection readers only mark rooms dirty or queue removals (never
// blocking) and kick it.
type registrar struct {
	core     *core.Core     // static
	info     wire.RelayInfo // static: immutable within the boot
	base     string         // static: balancer base URL, no trailing slash
	secret   string         // static
	client   *http.Client   // static
	log      *slog.Logger   // static
	m        *serverMetrics // static
	clock    clock.Clock    // static
	interval time.Duration  // static
	timeout  time.Duration  // static: per request

	kick chan struct{}                  // cap 1: dirty rooms or removals are waiting
	now  chan struct{}                  // cap 1: send a heartbeat at once (beatNow)
	jobs chan func(ctx context.Context) // run on the loop (shutdown uses it)
	// state adds the relay's retiring and reachability to a heartbeat
	// (retire.go, reachable.go); static, nil for none.
	state func(*wire.RegisterRequest)
	// watch follows the balancer's boot (bootwatch.go); static.
	watch *bootWatch

	mu     lockrank.Mutex
	dirty  map[*core.Room]struct{}   // guarded by mu: rooms whose count changed
	outbox map[wire.Removal]struct{} // guarded by mu: removals not yet confirmed

	beats atomic.Int64 // completed heartbeats (tests and debugging)
	ready *readiness   // static pointer: what /ready answers (ready.go)
	// handover: the balancer's last heartbeat answer said it applies
	// moved publications (wire.RegisterResponse.Handover).
	handover atomic.Bool

	// Owned by the run goroutine.
	balancerBoot string
	lastBeat     time.Time
	reregister   bool
	adminDrained bool // the last answer's AdminDrained, repeated in each heartbeat
	// credRefused: the balancer refused the last heartbeat's credential (401,
	// or 429 throttled). Publications and removals then wait for a
	// heartbeat it accepts (which publishes the whole snapshot), so a relay
	// with a stale SECRET fails at the heartbeat's backoff, not once per
	// room change, and spends no other relay's failed-auth budget.
	credRefused bool
}

func newRegistrar(s *Server) *registrar {
	g := &registrar{
		core:     s.core,
		base:     strings.TrimRight(s.opts.BalancerURL, "/"),
		secret:   s.opts.Secret,
		client:   &http.Client{Timeout: s.opts.RequestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second}},
		log:      s.log.With("component", "registrar"),
		m:        s.m,
		clock:    s.clock,
		interval: s.opts.HeartbeatInterval,
		timeout:  s.opts.RequestTimeout,
		kick:     make(chan struct{}, 1),
		now:      make(chan struct{}, 1),
		jobs:     make(chan func(context.Context)),
		dirty:    make(map[*core.Room]struct{}),
		outbox:   make(map[wire.Removal]struct{}),
		mu:       lockrank.Mutex{Class: lockrank.Registrar},
		// The balancer's expiry at its defaults: three intervals in whole
		// seconds (as the heartbeat reports them), 90 s at the least.
		ready: &readiness{mu: lockrank.Mutex{Class: lockrank.Readiness}, life: max(3*time.Duration(heartbeatSeconds(s.opts.HeartbeatInterval))*time.Second, balancerMinExpiry)},
		watch: newBootWatch(s),
	}
	g.watch.beat = g.beatNow
	return g
}

// beatNow asks the run goroutine for a heartbeat at once (a retirement to
// tell, a reachability learnt, a new balancer boot): never blocking.
func (g *registrar) beatNow() {
	select {
	case g.now <- struct{}{}:
	default:
	}
}

// RoomChanged implements notifier.
func (g *registrar) RoomChanged(r *core.Room) {
	g.mu.Lock()
	g.dirty[r] = struct{}{}
	g.mu.Unlock()
	g.signal()
}

// RoomRemoved implements notifier.
func (g *registrar) RoomRemoved(rem wire.Removal) {
	g.mu.Lock()
	g.outbox[rem] = struct{}{}
	n := len(g.outbox)
	g.mu.Unlock()
	g.m.outbox.Set(float64(n))
	g.signal()
}

func (g *registrar) signal() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// run is the registration goroutine: a heartbeat at once and on every tick,
// prompt publications and removals when kicked, and jobs from Shutdown.
func (g *registrar) run(ctx context.Context) {
	defer g.client.CloseIdleConnections()
	t := g.clock.NewTicker(g.interval)
	defer t.Stop()
	// A failed registration is retried sooner than the next heartbeat, with
	// a doubling delay: a relay that boots before its balancer can reach it
	// (Fly's proxy routes to it only once its checks pass) registers within
	// seconds, not a whole heartbeat later.
	retry := g.clock.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var backoff time.Duration
	again := func() {
		backoff = min(max(2*backoff, retryMin), g.interval)
		retry.Reset(backoff)
	}
	beat := func() {
		if g.heartbeat(ctx) {
			backoff = 0
			retry.Stop()
			return
		}
		again()
	}
	beat()
	var watching sync.WaitGroup
	defer watching.Wait()
	watching.Go(func() { g.watch.run(ctx) })
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			beat()
		case <-g.now:
			beat()
		case <-retry.C():
			beat()
		case <-g.kick:
			if g.credRefused {
				break // the retry's accepted heartbeat publishes it all
			}
			published := g.publishDirty(ctx)
			g.flushOutbox(ctx)
			switch {
			case g.reregister && g.clock.Now().Sub(g.lastBeat) >= min(time.Second, g.interval):
				beat()
			case !published:
				// The balancer did not answer: the heartbeat's snapshot
				// carries these rooms soon, not a whole interval later
				// (a handed-over room waits on it to be routed).
				again()
			}
		case job := <-g.jobs:
			job(ctx)
		}
	}
}

// do runs job on the registration goroutine and waits for it, or for ctx.
func (g *registrar) do(ctx context.Context, done <-chan struct{}, job func(context.Context)) {
	fin := make(chan struct{})
	select {
	case g.jobs <- func(c context.Context) { defer close(fin); job(c) }:
	case <-ctx.Done():
		return
	case <-done:
		return
	}
	select {
	case <-fin:
	case <-ctx.Done():
	}
}

// heartbeatSeconds is the interval as the heartbeat reports it: whole
// seconds, rounded up, so that the balancer's expiry is never shorter than
// three of our heartbeats.
func heartbeatSeconds(interval time.Duration) int {
	return int((interval + time.Second - 1) / time.Second)
}

// retryMin is the first delay before a failed registration is retried.
const retryMin = 250 * time.Millisecond

// heartbeat registers (with the current draining flag and counts), then
// publishes the whole room snapshot, then flushes the outbox. It reports
// whether the registration itself succeeded.
func (g *registrar) heartbeat(ctx context.Context) bool {
	defer g.beats.Add(1)
	g.lastBeat = g.clock.Now()
	g.reregister = false
	req := wire.RegisterRequest{
		Relay:            g.info,
		Draining:         g.core.Draining(),
		Connections:      g.core.NumConns(),
		Rooms:            g.core.NumRooms(),
		UnhostedReleased: g.core.UnhostedReleased(),
		HeartbeatSeconds: heartbeatSeconds(g.interval),
		AdminDrained:     g.adminDrained,
	}
	if g.state != nil {
		g.state(&req)
	}
	var resp wire.RegisterResponse
	if err := g.post(ctx, "register", wire.PathRegister, req, &resp); err != nil {
		g.credRefused = errors.Is(err, wire.ErrUnauthorized) || errors.Is(err, wire.ErrThrottled)
		g.log.Warn("failed to register with the balancer", "err", err)
		g.ready.failed(g.base, err)
		return false
	}
	g.credRefused = false
	g.ready.registered(g.lastBeat)
	if resp.Republish || resp.New || resp.BalancerBoot != g.balancerBoot {
		g.log.Info("republishing every room", "balancerBoot", resp.BalancerBoot,
			"new", resp.New, "republish", resp.Republish)
	}
	g.balancerBoot = resp.BalancerBoot
	g.watch.learnt(resp.BalancerBoot)
	g.handover.Store(resp.Handover)
	g.adminDrained = resp.AdminDrained
	g.publishSnapshot(ctx)
	g.flushOutbox(ctx)
	return true
}

// publishSnapshot publishes every live room (Snapshot=true). It supersedes
// whatever was dirty.
func (g *registrar) publishSnapshot(ctx context.Context) {
	g.mu.Lock()
	clear(g.dirty)
	g.mu.Unlock()
	pubs := g.core.Publications(nil)
	if len(pubs) == 0 {
		g.publish(ctx, nil, true)
		return
	}
	// Chunked like incremental updates, so a relay with thousands of rooms
	// stays under the balancer's body limit. Each chunk is a part of the
	// snapshot; the balancer never removes rooms missing from one.
	for len(pubs) > 0 {
		n := min(len(pubs), maxPerRequest)
		g.publish(ctx, pubs[:n], true)
		pubs = pubs[n:]
	}
}

// publishDirty publishes the rooms whose count changed since the last
// publication, coalesced: a room changed ten times is sent once, with its
// latest revision. It reports false when a request got no answer.
func (g *registrar) publishDirty(ctx context.Context) bool {
	g.mu.Lock()
	if len(g.dirty) == 0 {
		g.mu.Unlock()
		return true
	}
	rooms := make([]*core.Room, 0, len(g.dirty))
	for r := range g.dirty {
		rooms = append(rooms, r)
	}
	clear(g.dirty)
	g.mu.Unlock()
	pubs := g.core.Publications(rooms)
	ok := true
	for len(pubs) > 0 {
		n := min(len(pubs), maxPerRequest)
		ok = g.publish(ctx, pubs[:n], false) && ok
		pubs = pubs[n:]
	}
	return ok
}

// publish sends pubs and applies the verdicts; it reports false when the
// balancer gave none (the request failed).
func (g *registrar) publish(ctx context.Context, pubs []wire.Publication, snapshot bool) bool {
	if len(pubs) == 0 && !snapshot {
		return true
	}
	req := wire.PublishRequest{BootID: g.info.BootID, Endpoint: g.info.Endpoint, Rooms: pubs, Snapshot: snapshot}
	var resp wire.PublishResponse
	if err := g.post(ctx, "publish", wire.PathPublish, req, &resp); err != nil {
		// The next heartbeat republishes the same epoch and revision (or a
		// newer one); the balancer applies publications idempotently.
		g.log.Warn("failed to publish rooms", "rooms", len(pubs), "snapshot", snapshot, "err", err)
		return false
	}
	for _, res := range resp.Results {
		g.m.publications.WithLabelValues(res.Status.Label()).Inc()
		switch res.Status {
		case wire.PubApplied, wire.PubCurrent:
		case wire.PubRejected:
			g.reregister = true
		case wire.PubConflict, wire.PubFenced:
			g.log.Warn("balancer refused a room publication", "room", res.Name, "epoch", res.Epoch, "status", res.Status)
			g.refused(res)
		default:
			g.log.Warn("balancer answered an unknown publication status", "room", res.Name, "status", res.Status)
		}
	}
	if g.reregister && !snapshot {
		g.signal()
	}
	return true
}

// publishNow publishes one room at once from the caller's goroutine and
// reports the balancer's verdict: a room handed over to this machine is
// published before its host is served, so that the balancer sends its
// clients here rather than to the machine that gave it up. It touches
// none of the run goroutine's state; the room stays marked dirty, so the
// loop publishes it as well (publications are idempotent).
func (g *registrar) publishNow(ctx context.Context, r *core.Room) (wire.PublicationStatus, error) {
	p, _ := r.Publication()
	req := wire.PublishRequest{BootID: g.info.BootID, Endpoint: g.info.Endpoint, Rooms: []wire.Publication{p}}
	var resp wire.PublishResponse
	if err := g.post(ctx, "publish", wire.PathPublish, req, &resp); err != nil {
		return "", err
	}
	if len(resp.Results) != 1 {
		return "", fmt.Errorf("the balancer answered %d results for one publication", len(resp.Results))
	}
	st := resp.Results[0].Status
	g.m.publications.WithLabelValues(st.Label()).Inc()
	return st, nil
}

// refused ends a room whose publication the balancer refuses (conflict or
// fenced), if it is still the incarnation refused: a handed-over room the
// balancer never applied (another incarnation of the name won while its
// first publication had no verdict, handover.go), or any incarnation the
// balancer no longer routes to (it gave the name to an allocation placed
// elsewhere while this relay was cut off and removed, or fenced it).
// Nobody can be sent to such a room and two machines would host one name
// for good: its host and players learn (1012) and the name lives in one
// place.
func (g *registrar) refused(res wire.PublicationResult) {
	if g.core.EndIncarnation(res.Name, res.Epoch, core.ReasonRoomGone) {
		g.log.Warn("the balancer refused this room's publication; ended it here", "room", res.Name, "epoch", res.Epoch, "status", res.Status)
	}
}

// flushOutbox sends every unconfirmed removal; entries leave the outbox
// only on a confirming answer (removalSettled).
func (g *registrar) flushOutbox(ctx context.Context) {
	g.mu.Lock()
	rems := make([]wire.Removal, 0, len(g.outbox))
	for rem := range g.outbox {
		rems = append(rems, rem)
	}
	g.mu.Unlock()
	slices.SortFunc(rems, func(a, b wire.Removal) int { return strings.Compare(a.Name+"\x00"+a.Epoch, b.Name+"\x00"+b.Epoch) })
	for len(rems) > 0 {
		n := min(len(rems), maxPerRequest)
		if !g.unregister(ctx, rems[:n]) {
			return
		}
		rems = rems[n:]
	}
}

func (g *registrar) unregister(ctx context.Context, rems []wire.Removal) bool {
	req := wire.UnregisterRequest{BootID: g.info.BootID, Endpoint: g.info.Endpoint, Rooms: rems}
	var resp wire.UnregisterResponse
	if err := g.post(ctx, "unregister", wire.PathUnregister, req, &resp); err != nil {
		g.log.Warn("failed to unregister rooms; will retry", "rooms", len(rems), "err", err)
		return false
	}
	type key struct{ name, epoch string }
	sent := make(map[key]wire.Removal, len(rems))
	for _, rem := range rems {
		sent[key{rem.Name, rem.Epoch}] = rem
	}
	g.mu.Lock()
	for _, res := range resp.Results {
		g.m.removals.WithLabelValues(res.Status.Label()).Inc()
		rem, ok := sent[key{res.Name, res.Epoch}]
		if !ok || !removalSettled(res.Status) {
			if ok && res.Status != wire.RemRetry {
				g.log.Warn("balancer answered an unknown removal status; will retry", "room", res.Name, "epoch", res.Epoch, "status", res.Status)
			}
			continue
		}
		delete(g.outbox, rem)
	}
	n := len(g.outbox)
	g.mu.Unlock()
	g.m.outbox.Set(float64(n))
	return true
}

// removalSettled reports whether the balancer's verdict lets an outbox
// entry go: the removal was applied, that exact removal was already
// applied, or a newer incarnation owns the name. Anything else (RemRetry,
// an empty or unknown status, say from a newer or broken balancer) keeps
// it for the next heartbeat: dropping an unconfirmed removal would leave a
// ghost route.
func removalSettled(st wire.RemovalStatus) bool {
	switch st {
	case wire.RemApplied, wire.RemAlready, wire.RemSuperseded:
		return true
	}
	return false
}

// outboxLen is the number of unconfirmed removals.
func (g *registrar) outboxLen() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.outbox)
}

// post sends one internal request with the secret and the protocol
// version, bounded by the request timeout, and decodes the JSON answer.
// Errors never include the secret.
func (g *registrar) post(ctx context.Context, op, path string, in, out any) (err error) {
	defer func() {
		result := "ok"
		if err != nil {
			result = "error"
		}
		g.m.balancerReqs.WithLabelValues(op, result).Inc()
	}()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	err = wire.Call{Method: http.MethodPost, URL: g.base + path, Secret: g.secret, Body: in}.DoJSON(ctx, g.client, out)
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		return fmt.Errorf("balancer refused %s: %w", op, err)
	case err != nil:
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
