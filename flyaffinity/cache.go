package flyaffinity

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"
)

// entry is the cached outcome of the last lookup: a set, the lookup's error
// and when the next lookup is due. Only due changes after store, once.
type entry struct {
	set     *peerSet      // never nil
	err     error         // the last lookup's error; nil when it succeeded
	expires time.Duration // offset from Resolver.base at which a lookup is due (Fake clock)
	due     atomic.Bool   // set by timer when expires passes (wall clock)
	timer   *time.Timer   // wall clock only: sets due; stopped when replaced or on Close
}

// sfKey is the one singleflight key: there is one machine set per Resolver.
const sfKey = "vms"

// isDue reports whether e needs a lookup. On the wall clock it is one atomic
// load, flipped by a runtime timer: reading the clock costs more than the
// whole HRW computation on virtual machines without a fast TSC (about 30 ns
// here). A Fake clock is read every time.
func (r *Resolver) isDue(e *entry) bool {
	if r.realClock {
		return e.due.Load()
	}
	return r.elapsed() >= e.expires
}

// store makes set the current set for ttl and returns its entry.
func (r *Resolver) store(set *peerSet, err error, ttl time.Duration) *entry {
	e := &entry{set: set, err: err, expires: r.elapsed() + ttl}
	if r.realClock {
		e.timer = time.AfterFunc(ttl, func() { e.due.Store(true) })
	}
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
	t := time.NewTimer(r.cfg.RouteWait)
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
		start := time.Now()
		ids, skipped, err = r.lookup(ctx)
		r.m.lookupSeconds.Observe(time.Since(start).Seconds())
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
