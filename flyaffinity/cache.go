package flyaffinity

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// entry is the cached outcome of the last lookup: a set, the lookup's error
// and whether the next lookup is due. Only due changes after store, once.
type entry struct {
	set   *peerSet    // never nil
	err   error       // the last lookup's error; nil when it succeeded
	due   atomic.Bool // set by timer when the entry's TTL passes
	timer clock.Timer // the Resolver clock's AfterFunc: sets due; stopped when replaced or on Close
}

// sfKey is the one singleflight key: there is one machine set per Resolver.
const sfKey = "vms"

// isDue reports whether e needs a lookup: one atomic load, flipped by the
// clock's AfterFunc (a runtime timer on the wall clock, Advance on a Fake).
// Reading the clock instead costs more than the whole HRW computation on
// virtual machines without a fast TSC (about 30 ns here).
func (r *Resolver) isDue(e *entry) bool {
	return e.due.Load()
}

// store makes set the current set for ttl and returns its entry.
func (r *Resolver) store(set *peerSet, err error, ttl time.Duration) *entry {
	e := &entry{set: set, err: err}
	e.timer = r.clk.AfterFunc(ttl, func() { e.due.Store(true) })
	if old := r.cur.Swap(e); old != nil && old.timer != nil {
		old.timer.Stop()
	}
	return e
}

// awaitSet returns the entry to use: the cached one while it is fresh,
// otherwise the outcome of a lookup shared with every concurrent caller. It
// stops waiting when ctx is done and then returns the cached entry, which
// may be due or nil.
func (r *Resolver) awaitSet(ctx context.Context) *entry {
	e := r.cur.Load()
	if e != nil && !r.isDue(e) {
		return e
	}
	if r.ctx.Err() != nil { // closed: no new lookup
		return e
	}
	select {
	case res := <-r.sf.DoChan(sfKey, r.refresh):
		return res.Val.(*entry)
	case <-ctx.Done():
		return e
	}
}

// routeSet is awaitSet for Route: it waits on the wall clock at most
// RouteWait.
func (r *Resolver) routeSet(e *entry) *entry {
	if r.ctx.Err() != nil {
		return e
	}
	t := time.NewTimer(r.cfg.RouteWait) // wall clock: it bounds the wait for a DNS answer over a real socket, as LookupTimeout does
	defer t.Stop()
	select {
	case res := <-r.sf.DoChan(sfKey, r.refresh):
		return res.Val.(*entry)
	case <-t.C:
		return e
	}
}

// refresh runs one lookup (inside singleflight), stores its outcome and
// returns the entry now current. It never returns an error: a failed lookup
// stores the last good set again, due for a retry in r.retry, carrying the
// error.
func (r *Resolver) refresh() (any, error) {
	old := r.cur.Load()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		if old == nil {
			old = &entry{set: &peerSet{}, err: ErrClosed}
		}
		return old, nil
	}
	r.lookups.Add(1)
	r.mu.Unlock()
	defer r.lookups.Done()

	if old != nil && !r.isDue(old) {
		return old, nil // a lookup that just ended already refreshed it
	}
	var ids []string
	var skipped int
	var err error
	if r.qname != "" {
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.LookupTimeout)
		start := r.clk.Now()
		ids, skipped, err = r.lookup(ctx)
		r.m.lookupSeconds.Observe(r.clk.Now().Sub(start).Seconds())
		cancel()
	}
	if err != nil && r.ctx.Err() != nil {
		// Cancelled by Close: not a DNS failure, nothing to store.
		if old == nil {
			old = &entry{set: &peerSet{}, err: ErrClosed}
		}
		return old, nil
	}
	if skipped > 0 {
		r.m.skipped.Add(float64(skipped))
		r.log.Warn("skipped malformed machine entries in the DNS answer", "skipped", skipped)
	}
	if err != nil {
		r.m.lookupsFailed.Inc()
		return r.store(r.keep(old, err), err, r.retry), nil
	}
	r.m.lookupsOK.Inc()
	if old != nil && old.err != nil {
		r.log.Info("machine set lookups recovered")
	}
	s := newPeerSet(ids, r.cfg.Self, r.cfg.App, r.cfg.PeerPort)
	r.m.machines.Set(float64(len(s.ids)))
	if old == nil || !old.set.good || !slices.Equal(old.set.ids, s.ids) {
		r.m.changes.Inc()
		r.log.Info("machine set changed", "machines", len(s.ids), "listed", s.listed,
			"self_listed", s.selfIn || r.cfg.Self == "")
	}
	return r.store(s, nil, r.cfg.TTL), nil
}

// keep is the set after a failed lookup: the last good one when there is
// one, otherwise a set of this machine alone marked not good (so Route serves
// here and Owner fails). The first failure of a run is a warning, the
// retries that fail again are debug logs (the counter counts them all).
func (r *Resolver) keep(old *entry, err error) *peerSet {
	level := slog.LevelWarn
	if old != nil && old.err != nil {
		level = slog.LevelDebug
	}
	if old != nil && old.set.good {
		r.log.Log(r.ctx, level, "failed to look up the machine set; keeping the last good set",
			"err", err, "machines", len(old.set.ids), "retry_in", r.retry)
		return old.set
	}
	r.log.Log(r.ctx, level, "failed to look up the machine set; none known yet, serving every session here",
		"err", err, "retry_in", r.retry)
	s := newPeerSet(nil, r.cfg.Self, r.cfg.App, r.cfg.PeerPort)
	s.good = false
	return s
}
