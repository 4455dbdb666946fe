package balancer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// ConsistencyCheck verifies the invariants the balancer's rules keep
// (state.check). It is meant for tests and debugging: it reads every room
// under its lease in turn, so call it on a quiet balancer (no request in
// flight, for instance after Shutdown) for an exact answer. It waits at
// most checkLeaseWait for leases still held by finishing requests.
func (s *Server) ConsistencyCheck() error { return s.st.check() }

// checkLeaseWait bounds how long check waits, in all, for leases held by
// requests still finishing.
const checkLeaseWait = 10 * time.Second

// check verifies:
//
//   - registry: every registration is filed under its endpoint and its
//     boot, and nothing else is; no current boot is also a retired one of
//     its endpoint, and at most maxRetiredBoots are kept; an endpoint
//     marked gone is not registered; an admin drain mark and the
//     registration's flag agree; no proof gate is left without a user;
//   - rooms: every entry is filed under its name, not dead, and holds
//     something (a route or a pending allocation); a live route is complete
//     and its incarnation is not tombstoned; a pending allocation names its
//     endpoint and id;
//   - tombstones: at most MaxTombstones queue slots, each entry with its
//     one current slot (tombstones.check);
//   - aggregates and indexes: every registration's room, connection,
//     waiting and vacant counts equal the sums of the live routes that
//     point at it, and its room index lists exactly those routes' rooms,
//     in name order; the table's room index lists exactly the rooms with
//     a live route; the rooms counted per source address are the live
//     routes of each source.
func (st *state) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	g := st.reg
	g.mu.RLock()
	if g.max > 0 && len(g.byEndpoint) > g.max {
		bad("%d relays registered, over the bound of %d", len(g.byEndpoint), g.max)
	}
	entries := make(map[*relayEntry]bool, len(g.byEndpoint))
	for ep, r := range g.byEndpoint {
		entries[r] = true
		if r.info.Endpoint != ep {
			bad("relay %s is filed under endpoint %s", r.info.Endpoint, ep)
		}
		if g.byBoot[r.info.BootID] != r {
			bad("relay %s: boot %s is not filed under its boot id", ep, r.info.BootID)
		}
		if slices.Contains(g.retired[ep], r.info.BootID) {
			bad("relay %s: its current boot %s is also retired", ep, r.info.BootID)
		}
		if r.adminDraining != (g.drained[ep] == r.info.BootID) {
			bad("relay %s: admin draining %v, drain mark %q", ep, r.adminDraining, g.drained[ep])
		}
		if _, ok := g.gone[ep]; ok {
			bad("relay %s is registered and marked gone", ep)
		}
	}
	if len(g.byBoot) != len(g.byEndpoint) {
		bad("%d registrations by boot, %d by endpoint", len(g.byBoot), len(g.byEndpoint))
	}
	for ep, boots := range g.retired {
		if len(boots) > maxRetiredBoots {
			bad("endpoint %s keeps %d retired boots", ep, len(boots))
		}
	}
	for ep, pg := range g.gates {
		if pg.users <= 0 {
			bad("endpoint %s keeps a proof gate without users", ep)
		}
	}
	g.mu.RUnlock()

	type sums struct{ rooms, conns, waiting, vacant int64 }
	want := make(map[*relayEntry]sums, len(entries))
	for r := range entries {
		want[r] = sums{}
	}
	now := st.clock.Now()
	var pendings int64
	live := make(map[*roomEntry]*relayEntry) // entries with a live route -> its registration
	sources := make(map[string]int32)        // live routes per source address
	ctx, cancel := context.WithTimeout(context.Background(), checkLeaseWait)
	defer cancel()
	st.rooms.each(func(e *roomEntry) {
		if !st.rooms.acquireEntry(ctx, e) {
			if ctx.Err() != nil {
				bad("room %q: its lease stayed held (the balancer is not quiet)", e.name)
			}
			return
		}
		defer st.rooms.release(e)
		if st.rooms.get(e.name) != e {
			bad("room %q is not filed under its name", e.name)
		}
		if e.empty() {
			bad("room %q holds nothing but is in the table", e.name)
		}
		if p := e.pending; p != nil && (p.allocationID == "" || p.endpoint == "") {
			bad("room %q: a pending allocation without its id or endpoint", e.name)
		}
		if e.pending != nil {
			pendings++
		}
		rec := e.live.Load()
		if rec == nil {
			return
		}
		switch {
		case rec.relay == nil || rec.epoch == "" || rec.clientSecret == "" || rec.connections < 0:
			bad("room %q: an incomplete live route", e.name)
			return
		case st.tombs.fenced(e.name, rec.relay.info.BootID, rec.epoch, now):
			bad("room %q: its live incarnation %s is tombstoned", e.name, rec.epoch)
		}
		sm := want[rec.relay]
		sm.rooms++
		sm.conns += int64(rec.connections)
		switch phaseOf(rec) {
		case wire.RoomWaiting:
			sm.waiting++
		case wire.RoomVacant:
			sm.vacant++
		}
		want[rec.relay] = sm
		live[e] = rec.relay
		if rec.source != "" {
			sources[rec.source]++
		}
	})
	listed := 0
	st.rooms.index.check("the room index", bad, func(e *roomEntry) {
		listed++
		if live[e] == nil {
			bad("the room index lists %q, which has no live route", e.name)
		}
	})
	if listed != len(live) {
		bad("the room index lists %d entries, %d hold a live route", listed, len(live))
	}
	if got := st.rooms.sources.counts(); !maps.Equal(got, sources) {
		bad("rooms counted per source %v, live routes per source %v", got, sources)
	}
	st.tombs.check(bad)
	if got, max := st.rooms.pendings.Load(), int64(maxPendingAllocations); got != pendings || got > max {
		bad("%d pending allocations counted, %d held (at most %d)", got, pendings, max)
	}
	for r, sm := range want {
		if got := r.rooms.Load(); got != sm.rooms {
			bad("relay %s (boot %s) counts %d rooms, its live routes are %d", r.info.Endpoint, r.info.BootID, got, sm.rooms)
		}
		if got := r.conns.Load(); got != sm.conns {
			bad("relay %s (boot %s) counts %d connections, its live routes hold %d", r.info.Endpoint, r.info.BootID, got, sm.conns)
		}
		if w, v := r.waiting.Load(), r.vacant.Load(); w != sm.waiting || v != sm.vacant {
			bad("relay %s (boot %s) counts %d waiting and %d vacant rooms, its live routes %d and %d", r.info.Endpoint, r.info.BootID, w, v, sm.waiting, sm.vacant)
		}
		n := int64(0)
		r.index.check("relay "+r.info.Endpoint+"'s room index", bad, func(e *roomEntry) {
			n++
			if live[e] != r {
				bad("relay %s's room index lists %q, whose live route is not its", r.info.Endpoint, e.name)
			}
		})
		if n != sm.rooms {
			bad("relay %s's room index lists %d rooms, its live routes are %d", r.info.Endpoint, n, sm.rooms)
		}
	}
	return errors.Join(errs...)
}
