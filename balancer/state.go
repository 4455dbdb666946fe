package balancer

import (
	"context"
	"log/slog"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// state is the balancer's data and every rule that keeps it consistent
// (the sections of this package's doc: registration, health, publications,
// removals, allocation, cleanup, and the views the API reads). It owns the
// registry and the room table and takes their leases, gates and locks
// itself; the HTTP handlers only decode a request, call one state method
// and encode its answer. Its only way out is relays, the network calls its
// rules need (a boot proof, an allocation, a room close), made under a
// room's lease where the rule says so and never under a registry lock.
//
// ConsistencyCheck (state_check.go) verifies what the rules promise about
// the data, and runs after every balancer test.
type state struct {
	opts   Options      // static: validated, defaults applied
	clock  clock.Clock  // static
	log    *slog.Logger // static
	relays *relayClient // static

	reg   *registry   // internally locked (registry.mu, proof gates)
	rooms *roomTable  // internally locked (shard locks, room leases)
	tombs *tombstones // internally locked; written under the room's lease
	mem   *memGate    // safe for concurrent use
	// events is told of every route change by rooms and reads the fleet
	// view from this state; internally locked.
	events *eventHub
}

// newState builds the state and its event hub, which it tells of route
// changes; onEventDrop (may be nil) counts the streams the hub drops.
func newState(o Options, relays *relayClient, onEventDrop func()) *state {
	reg := newRegistry()
	reg.max = o.MaxRelays
	st := &state{opts: o, clock: o.Clock, log: o.Logger, relays: relays, reg: reg, rooms: newRoomTable(newSourceRooms(o.MaxRoomsPerSource)),
		tombs: newTombstones(o.MaxTombstones, o.TombstoneRetention), mem: newMemGate(o)}
	st.events = newEventHub(o.MaxEventStreams, st.fleetView, onEventDrop)
	st.rooms.changed = st.events
	return st
}

// fence tombstones e's incarnation (boot, epoch) now. Lease held.
func (st *state) fence(e *roomEntry, boot, epoch string) {
	st.tombs.fence(e.name, boot, epoch, st.clock.Now())
}

// fenced reports whether e's incarnation (boot, epoch) is tombstoned. Lease
// held.
func (st *state) fenced(e *roomEntry, boot, epoch string) bool {
	return st.tombs.fenced(e.name, boot, epoch, st.clock.Now())
}

// leaseForRelay takes a room's lease for a relay request, waiting at most
// twice RelayTimeout (an allocation holds it for about one).
func (st *state) leaseForRelay(ctx context.Context, name string) (*roomEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*st.opts.RelayTimeout)
	defer cancel()
	e, err := st.rooms.acquire(ctx, name)
	if err != nil {
		return nil, wire.ErrAllocationBusy.WithMessage("the room is busy; retry later")
	}
	return e, nil
}

// liveRoom is the room's current route, or room_not_found when there is
// none or its registration was replaced or removed (join and location
// answer alike: such a room is gone, not half-alive). It takes no lease.
func (st *state) liveRoom(name string) (*roomRecord, error) {
	e := st.rooms.get(name)
	if e == nil {
		return nil, wire.ErrRoomNotFound
	}
	rec := e.live.Load()
	if rec == nil || !st.reg.isCurrent(rec.relay) {
		return nil, wire.ErrRoomNotFound
	}
	return rec, nil
}

// reservation is the live route of name if it is allocationID's: what a
// reservation answers after its allocation committed. A route gone at
// once (its relay was removed, or an operator closed it and another
// allocation took the name) is allocation_outcome_indeterminate: the
// exact retry tells, and never another allocation's room and secret.
func (st *state) reservation(name, allocationID string) (*roomRecord, error) {
	rec, err := st.liveRoom(name)
	if err != nil || rec.allocationID != allocationID {
		return nil, wire.ErrIndeterminate
	}
	return rec, nil
}

// withRoute runs fn on name's live route under the room's lease, so the
// route cannot change until fn returns (a mutating migration call holds
// it across its relay request). A name nobody holds gets no entry.
func (st *state) withRoute(ctx context.Context, name string, fn func(*roomRecord) (any, error)) (any, error) {
	if st.rooms.get(name) == nil {
		return nil, wire.ErrRoomNotFound // never create an entry for a name nobody holds
	}
	e, err := st.rooms.acquire(ctx, name)
	if err != nil {
		return nil, wire.ErrAllocationBusy.WithMessage("another change of this room is in progress; retry")
	}
	defer st.rooms.release(e)
	rec := e.live.Load()
	if rec == nil || !st.reg.isCurrent(rec.relay) {
		return nil, wire.ErrRoomNotFound
	}
	return fn(rec)
}

// maxRouteReads bounds onRoute's optimistic reads of a changing route.
const maxRouteReads = 2

// onRoute runs fn on an optimistic snapshot of name's route, without the
// lease, and answers fn's result only if the route is still that one
// afterwards (else it reads the new one, at most maxRouteReads times:
// route_changed).
func (st *state) onRoute(name string, fn func(*roomRecord) (any, error)) (any, error) {
	for range maxRouteReads {
		rec, err := st.liveRoom(name)
		if err != nil {
			return nil, err
		}
		out, err := fn(rec)
		if now, _ := st.liveRoom(name); !sameRoute(now, rec) {
			continue // the route changed meanwhile: read the new one
		}
		return out, err
	}
	return nil, wire.ErrRouteChanged
}

// sameRoute reports whether b is the incarnation a routed to, at the same
// relay registration (a newer count of it is the same route).
func sameRoute(a, b *roomRecord) bool {
	return a != nil && b != nil && a.relay == b.relay && a.epoch == b.epoch
}
