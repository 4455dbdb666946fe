package flyaffinity

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/purrfly/purrfly/wire"
)

// replaySrcKey is Fly-Replay-Src in net/http's canonical form, so Route reads
// the header map directly.
var replaySrcKey = http.CanonicalHeaderKey(wire.HeaderFlyReplaySrc)

var serveHere = wire.RouteResult{Serve: true}

// Route is the relay's Router hook (relay.Options.Router). It decides, before the
// WebSocket upgrade, whether this machine serves the session or hands the
// request to the owning machine via Fly-Replay (see the package doc for the
// rules). With a fresh cached set it does not allocate and does not wait; with
// a due set it waits at most Config.RouteWait for the lookup.
func (r *Resolver) Route(sid wire.SessionID, req *http.Request) wire.RouteResult {
	self := r.cfg.Self
	if self == "" {
		r.m.offFly.Inc()
		return serveHere
	}
	if sid == "" {
		r.m.noHint.Inc()
		return serveHere
	}
	e := r.cur.Load()
	if e == nil || r.isDue(e) {
		if e = r.routeSet(e); e == nil {
			r.m.noSet.Inc()
			return serveHere
		}
	}
	s := e.set
	if !s.good {
		r.m.noSet.Inc()
		return serveHere
	}
	if len(s.ids) <= 1 {
		r.m.single.Inc()
		return serveHere
	}
	owner := s.owner(keyHash(string(sid)))
	if owner == self {
		r.m.owner.Inc()
		return serveHere
	}
	if req != nil && len(req.Header[replaySrcKey]) > 0 {
		// Replayed once already and the sender's view of the set differs
		// from ours: serve here rather than bounce it again.
		r.m.replayed.Inc()
		return serveHere
	}
	r.m.handoff.Inc()
	return wire.RouteResult{Instance: owner}
}

// Owner returns the id of the machine that owns sid under the current set
// (this machine counted in, see the package doc). It waits for a due lookup
// while ctx allows and falls back to the last good set; it fails with
// ErrNoMachines only when no set was ever obtained or the set is empty.
func (r *Resolver) Owner(ctx context.Context, sid wire.SessionID) (string, error) {
	s, err := r.goodSet(ctx)
	if err != nil {
		return "", fmt.Errorf("failed to find the owner of a session: %w", err)
	}
	owner := s.owner(keyHash(string(sid)))
	if owner == "" {
		return "", fmt.Errorf("failed to find the owner of a session: %w: the set is empty", ErrNoMachines)
	}
	return owner, nil
}

// Peers returns the base URLs of the other machines (this one excluded), in
// machine id order, for dashboards and cluster-wide stats:
// http://<id>.vm.<app>.internal:<PeerPort> (a hostname, never bracketed). It
// waits and falls back like Owner. The slice is the caller's.
func (r *Resolver) Peers(ctx context.Context) ([]string, error) {
	s, err := r.goodSet(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list peers: %w", err)
	}
	return slices.Clone(s.peers), nil
}

// goodSet is awaitSet that fails when no good set is known.
func (r *Resolver) goodSet(ctx context.Context) (*peerSet, error) {
	e := r.awaitSet(ctx)
	switch {
	case e == nil:
		cause := context.Cause(ctx)
		if cause == nil {
			cause = ErrClosed
		}
		return nil, fmt.Errorf("%w: %w", ErrNoMachines, cause)
	case !e.set.good:
		return nil, fmt.Errorf("%w: %w", ErrNoMachines, e.err)
	}
	return e.set, nil
}
