package balancer

import (
	"context"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// relayEntry is one registration: one relay boot at one endpoint, from its
// first accepted heartbeat until it is replaced or removed. Room routes point
// at the entry that published them and are valid only while it is the
// endpoint's current entry, so replacing or removing the entry invalidates
// all of its routes at once.
type relayEntry struct {
	info     wire.RelayInfo // static after construction (Labels and Capacity included: read without a lock)
	restPort int            // static: the public endpoint's port (PublicEndpoint, else Endpoint)

	// Aggregates of the live routes pointing at this entry, written under
	// those rooms' leases (relayEntry.count, roomEntry.setLive): rooms,
	// connections, the rooms waiting (nobody connected) and vacant (host
	// left), and the rooms by name.
	rooms, conns    atomic.Int64
	waiting, vacant atomic.Int64
	index           nameIndex

	// Guarded by registry.mu:
	liveness      uint64
	lastHeartbeat time.Time
	selfDraining  bool // the relay said so in its heartbeat
	adminDraining bool // POST /v1/instances/{id}/drain
	// retiring: a heartbeat of this boot said so (a deploy retired it);
	// never cleared within the boot, so no heartbeat turns it back.
	// retireBy is the soonest RetireBy it reported.
	retiring bool
	retireBy time.Time
	// unreachable: its last heartbeat said players cannot reach it yet.
	unreachable bool
	// unhosted: the rooms it released unhosted, as its last heartbeat said.
	unhosted uint64
	failures int // consecutive failed health probes since the last good one or heartbeat
	// inflight counts the allocation calls to this relay under way
	// (allocateOn; atomic, no lock), bounded by Options.RelayInflight.
	inflight atomic.Int32
	// expiry is how long without a heartbeat removes it: max(RelayExpiry,
	// 3 x the heartbeat interval the relay reports).
	expiry time.Duration
}

func (r *relayEntry) drainingLocked() bool { return r.selfDraining || r.adminDraining }

// staleAfter is how long without a heartbeat makes a relay stale: two
// thirds of its expiry (two missed heartbeats of three), where def is
// Options.RelayExpiry and own the relay's own expiry (0: none).
func staleAfter(def, own time.Duration) time.Duration { return max(def, own) * 2 / 3 }

// staleLocked reports whether the balancer no longer trusts r to answer:
// it missed two of three heartbeats, or a health probe failed since its
// last good probe or heartbeat. Its rooms stay routed (it may be fine),
// but no new room goes there until it answers again.
func (r *relayEntry) staleLocked(now time.Time, defExpiry time.Duration) bool {
	return now.Sub(r.lastHeartbeat) > staleAfter(defExpiry, r.expiry) || r.failures > 0
}

// relaySnap is a copy of a relay's mutable state, taken under registry.mu.
type relaySnap struct {
	entry         *relayEntry
	liveness      uint64
	lastHeartbeat time.Time
	draining      bool
	retiring      bool
	retireBy      time.Time
	unreachable   bool
	expiry        time.Duration // 0: Options.RelayExpiry
	failures      int           // failed health probes since the last good one or heartbeat
}

// unplaceableWhyLocked names why placement skips r for a room pinned to
// it ("" when it does not): force places it while an operator's drain
// (not the relay's own, which refuses the room) holds it.
func (r *relayEntry) unplaceableWhyLocked(now time.Time, defExpiry time.Duration, force bool) string {
	switch {
	case r.retiring:
		return "retiring"
	case r.selfDraining:
		return "draining (shutting down)"
	case r.adminDraining && !force:
		return "draining (force: true places the room there anyway)"
	case r.unreachable:
		return "starting (not yet reachable by players)"
	case r.staleLocked(now, defExpiry):
		return "stale (missed heartbeats or a failed health probe)"
	}
	return ""
}

// snapLocked copies r's mutable state; the caller holds registry.mu.
func (r *relayEntry) snapLocked() relaySnap {
	return relaySnap{entry: r, liveness: r.liveness, lastHeartbeat: r.lastHeartbeat, draining: r.drainingLocked(),
		retiring: r.retiring, retireBy: r.retireBy, unreachable: r.unreachable, expiry: r.expiry, failures: r.failures}
}

// registry holds the current registration of every endpoint. Its lock is
// held only for map and field operations, never across a network call; the
// per-endpoint proof gates serialize the (networked) boot proofs.
type registry struct {
	livenessSeq atomic.Uint64 // balancer-owned liveness versions
	max         int           // static once set (newState): registrations at most; 0 for none

	mu         sync.RWMutex
	byEndpoint map[string]*relayEntry // guarded by mu
	byBoot     map[string]*relayEntry // guarded by mu
	retired    map[string][]string    // endpoint -> replaced boots, newest last; guarded by mu
	drained    map[string]string      // endpoint -> boot drained by an admin; guarded by mu
	gates      map[string]*proofGate  // endpoint -> proof gate, only while in use; guarded by mu
	gone       map[string]goneRelay   // unregistered endpoint -> its last registration; guarded by mu
}

// goneRelay is an endpoint's last registration after its removal (health
// or expiry): its last heartbeat, and the boot's routing metadata, which
// stays fixed for that boot should it register again.
type goneRelay struct {
	at   time.Time
	info wire.RelayInfo
}

// proofGate serializes the boot proofs of one endpoint. It stays in the
// registry only while someone holds or waits for it (users, guarded by
// registry.mu), so endpoints that come and go leave nothing behind.
type proofGate struct {
	ch    chan struct{}
	users int
}

func newRegistry() *registry {
	return &registry{
		byEndpoint: make(map[string]*relayEntry),
		byBoot:     make(map[string]*relayEntry),
		retired:    make(map[string][]string),
		drained:    make(map[string]string),
		gates:      make(map[string]*proofGate),
		gone:       make(map[string]goneRelay),
	}
}

// current returns the endpoint's current registration, or nil.
func (g *registry) current(endpoint string) *relayEntry {
	g.mu.RLock()
	r := g.byEndpoint[endpoint]
	g.mu.RUnlock()
	return r
}

// isCurrent reports whether r is still its endpoint's registration.
func (g *registry) isCurrent(r *relayEntry) bool {
	return r != nil && g.current(r.info.Endpoint) == r
}

// heartbeatOutcome says what a heartbeat did.
type heartbeatOutcome int

const (
	hbRefreshed heartbeatOutcome = iota // the boot is the current one: refreshed
	hbNeedProof                         // new endpoint or new boot: prove it first
)

// refresh applies a heartbeat of the endpoint's current boot. It needs no
// proof; anything else (unknown endpoint, different boot) does.
func (g *registry) refresh(req wire.RegisterRequest, now time.Time) (uint64, heartbeatOutcome, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	info := req.Relay
	if other := g.byBoot[info.BootID]; other != nil && other.info.Endpoint != info.Endpoint {
		return 0, 0, wire.ErrMetadataChanged
	}
	for _, b := range g.retired[info.Endpoint] {
		if b == info.BootID {
			return 0, 0, wire.ErrStaleBoot
		}
	}
	r := g.byEndpoint[info.Endpoint]
	if r == nil && g.fullLocked() {
		return 0, 0, wire.ErrTooManyRelays // refused before its proof costs a probe
	}
	if r == nil || r.info.BootID != info.BootID {
		if g.movedSinceGoneLocked(info) {
			return 0, 0, wire.ErrMetadataChanged
		}
		return 0, hbNeedProof, nil
	}
	if !r.info.SameRoute(info) {
		return 0, 0, wire.ErrMetadataChanged
	}
	return g.touchLocked(r, req, now), hbRefreshed, nil
}

// movedSinceGoneLocked reports whether info's boot was removed (health,
// expiry) with other routing metadata: a boot's routing is fixed for its
// life, registered or not. The endpoint's own mark is looked at first;
// one at another endpoint (the boot moved) costs a walk of the marks, on
// a path that needs a proof anyway.
func (g *registry) movedSinceGoneLocked(info wire.RelayInfo) bool {
	if m, ok := g.gone[info.Endpoint]; ok && m.info.BootID == info.BootID {
		return !m.info.SameRoute(info)
	}
	for _, m := range g.gone {
		if m.info.BootID == info.BootID {
			return true // gone from another endpoint
		}
	}
	return false
}

func (g *registry) touchLocked(r *relayEntry, req wire.RegisterRequest, now time.Time) uint64 {
	r.liveness = g.livenessSeq.Add(1)
	r.lastHeartbeat = now
	r.selfDraining = req.Draining
	if req.Retiring {
		r.retiring = true
		if by := req.RetireBy; !by.IsZero() && (r.retireBy.IsZero() || by.Before(r.retireBy)) {
			r.retireBy = by
		}
	}
	r.unreachable = req.Unreachable && !r.retiring
	r.unhosted = req.UnhostedReleased
	r.failures = 0
	r.expiry = 3 * time.Duration(req.HeartbeatSeconds) * time.Second
	return r.liveness
}

// unhostedTotal sums the registrations' unhosted releases.
func (g *registry) unhostedTotal() uint64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var n uint64
	for _, r := range g.byEndpoint {
		n += r.unhosted
	}
	return n
}

// fullLocked reports whether a new endpoint would pass the bound.
func (g *registry) fullLocked() bool { return g.max > 0 && len(g.byEndpoint) >= g.max }

// install makes a proven boot the endpoint's registration, replacing (and
// so invalidating the routes of) any previous one. The caller holds the
// endpoint's proof gate. It reports whether a different boot was replaced;
// a new endpoint past the bound is refused (ErrTooManyRelays: others may
// have registered during its proof).
func (g *registry) install(req wire.RegisterRequest, now time.Time) (uint64, string, error) {
	info := req.Relay
	r := &relayEntry{info: info, restPort: endpointPort(publicEndpoint(info))}
	g.mu.Lock()
	defer g.mu.Unlock()
	var replaced string
	old := g.byEndpoint[info.Endpoint]
	if old == nil && g.fullLocked() {
		return 0, "", wire.ErrTooManyRelays
	}
	// A boot this balancer has not known (it restarted, or took over as
	// the standby) keeps the operator's drain it repeats; one it knows
	// (removed and back) has its drain mark here, or was undrained.
	known := g.gone[info.Endpoint].info.BootID == info.BootID || old != nil && old.info.BootID == info.BootID
	if old != nil {
		delete(g.byBoot, old.info.BootID)
		if old.info.BootID != info.BootID {
			replaced = old.info.BootID
			g.retireLocked(info.Endpoint, old.info.BootID)
		}
	}
	if b, ok := g.drained[info.Endpoint]; ok && b != info.BootID {
		delete(g.drained, info.Endpoint) // the drained boot is gone
	}
	if req.AdminDrained && !known {
		g.drained[info.Endpoint] = info.BootID
	}
	r.adminDraining = g.drained[info.Endpoint] == info.BootID
	g.byEndpoint[info.Endpoint] = r
	g.byBoot[info.BootID] = r
	delete(g.gone, info.Endpoint)
	return g.touchLocked(r, req, now), replaced, nil
}

func (g *registry) retireLocked(endpoint, boot string) {
	l := append(g.retired[endpoint], boot)
	if len(l) > maxRetiredBoots {
		l = l[len(l)-maxRetiredBoots:]
	}
	g.retired[endpoint] = l
}

// unregisterLocked drops r's registration and notes its endpoint's last
// sign of life (its last heartbeat).
func (g *registry) unregisterLocked(r *relayEntry) {
	delete(g.byEndpoint, r.info.Endpoint)
	delete(g.byBoot, r.info.BootID)
	g.gone[r.info.Endpoint] = goneRelay{at: r.lastHeartbeat, info: r.info}
}

// prune forgets the retired boots and the admin drain mark of every
// unregistered endpoint whose last heartbeat is older than retention: a machine that went
// away for good (a scale-down, a replaced machine's address) leaves nothing
// behind. A delayed heartbeat of a retired boot is long over by then; one
// that still came would need a new proof, which the endpoint (another
// process, or nothing) cannot give.
func (g *registry) prune(now time.Time, retention time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for ep, m := range g.gone {
		if g.byEndpoint[ep] != nil {
			delete(g.gone, ep) // came back (install clears it too)
			continue
		}
		if now.Sub(m.at) >= retention {
			delete(g.retired, ep)
			delete(g.drained, ep)
			delete(g.gone, ep)
		}
	}
}

// isRetired reports whether boot was replaced at endpoint.
func (g *registry) isRetired(endpoint, boot string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, b := range g.retired[endpoint] {
		if b == boot {
			return true
		}
	}
	return false
}

// removeIf removes the registration captured in snap if it is still the
// current one with the same liveness version: a heartbeat that arrived since
// the capture keeps it.
func (g *registry) removeIf(snap relaySnap) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := snap.entry
	if g.byEndpoint[r.info.Endpoint] != r || r.liveness != snap.liveness {
		return false
	}
	g.unregisterLocked(r)
	return true
}

// probeFailed records a failed health probe of the registration captured
// in snap and removes it once limit consecutive probes have failed. A
// heartbeat since the capture (a newer liveness version) keeps it: that
// heartbeat started the count again.
func (g *registry) probeFailed(snap relaySnap, limit int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := snap.entry
	if g.byEndpoint[r.info.Endpoint] != r || r.liveness != snap.liveness {
		return false
	}
	r.failures++
	if r.failures < limit {
		return false
	}
	g.unregisterLocked(r)
	return true
}

// probeOK records a good health probe: the failure count starts again.
func (g *registry) probeOK(snap relaySnap) {
	g.mu.Lock()
	snap.entry.failures = 0
	g.mu.Unlock()
}

// snapshot copies every current registration, ordered by endpoint.
func (g *registry) snapshot() []relaySnap {
	g.mu.RLock()
	out := make([]relaySnap, 0, len(g.byEndpoint))
	for _, r := range g.byEndpoint {
		out = append(out, r.snapLocked())
	}
	g.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].entry.info.Endpoint < out[j].entry.info.Endpoint })
	return out
}

// setAdminDrain sets or clears the admin drain of the relay whose boot id
// or machine id is id. The mark is kept by endpoint for the boot, so that
// it survives the relay's removal and return within the same boot.
func (g *registry) setAdminDrain(id string, on bool) (relaySnap, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.byBoot[id]
	if r == nil {
		for _, c := range g.byEndpoint {
			if c.info.MachineID != "" && c.info.MachineID == id {
				r = c
				break
			}
		}
	}
	if r == nil {
		if !on {
			// Not registered now (removed, about to return): its mark
			// must not drain it again when it does.
			for ep, b := range g.drained {
				if b == id {
					delete(g.drained, ep)
				}
			}
		}
		return relaySnap{}, false
	}
	r.adminDraining = on
	if on {
		g.drained[r.info.Endpoint] = r.info.BootID
	} else if g.drained[r.info.Endpoint] == r.info.BootID {
		delete(g.drained, r.info.Endpoint)
	}
	return r.snapLocked(), true
}

// isDrained reports whether an operator drained boot at endpoint (what a
// heartbeat's answer tells the relay to repeat).
func (g *registry) isDrained(endpoint, boot string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.drained[endpoint] == boot
}

// acquireGate takes the endpoint's proof gate, giving up when ctx ends.
func (g *registry) acquireGate(ctx context.Context, endpoint string) (func(), error) {
	g.mu.Lock()
	pg := g.gates[endpoint]
	if pg == nil {
		pg = &proofGate{ch: make(chan struct{}, 1)}
		g.gates[endpoint] = pg
	}
	pg.users++
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		if pg.users--; pg.users == 0 {
			delete(g.gates, endpoint)
		}
		g.mu.Unlock()
	}
	select {
	case pg.ch <- struct{}{}:
		return func() { <-pg.ch; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// publicEndpoint is the URL clients ping for a relay: its PublicEndpoint
// (one per multi-machine app), else its own Endpoint.
func publicEndpoint(i wire.RelayInfo) string {
	if i.PublicEndpoint != "" {
		return i.PublicEndpoint
	}
	return i.Endpoint
}

// endpointPort is the port of an http(s) URL, explicit or by scheme.
func endpointPort(endpoint string) int {
	u, err := url.Parse(endpoint)
	if err != nil {
		return 0
	}
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}
