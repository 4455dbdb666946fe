package balancer

import (
	"context"
	"errors"
	"fmt"

	"github.com/purrfly/purrfly/wire"
)

// The allocation rules (package doc: Allocation and placement): placement, replay by
// allocation id, vacant rooms, pending outcomes, all under the room's lease.

// allocate places (or replays) the allocation of name under the room's
// lease, which it holds across the relay call so that concurrent
// allocations of one name are decided one after the other. source is the
// caller's address for the per-source cap ("" for none: admin and Go
// callers); admit decides first whether an allocation that may make a new
// room is taken at all. Then:
//
//   - a live route with the same allocation id: ask its relay again (the
//     relay replays exactly) and answer the same capability;
//   - a live route with another allocation id: ErrRoomTaken, unless the
//     room is vacant (its host left): then its relay is asked, and it
//     decides (it takes the name over for a new incarnation when nobody is
//     connected, else answers room_name_taken; draining, it lets the
//     vacant room go and answers draining, and the room is placed anew);
//   - a pending (indeterminate) allocation: go back to that relay, whatever
//     the allocation id (the relay replays it, refuses another id for a room
//     it holds, or creates the room if it never did);
//   - otherwise place it (Placement): the relays that fit p (labels, not
//     draining, not full), region first, in p's strategy's order; a relay
//     that cannot be reached, is draining or is full passes to the next
//     candidate. With inRegion (legacy GET) only the region's relays are
//     candidates when it has any; other regions only when it has none.
//     None fits, or every one tried refused as full or draining:
//     wire.ErrNoCandidate saying why.
func (st *state) allocate(ctx context.Context, name, allocationID string, p Placement, inRegion bool, source string) (wire.Capability, error) {
	region := p.Region
	if st.rooms.sources.max <= 0 {
		source = "" // no cap: nothing to count
	}
	e, err := st.rooms.acquire(ctx, name)
	if err != nil {
		return wire.Capability{}, wire.ErrAllocationBusy
	}
	defer st.rooms.release(e)
	done, err := st.admit(e, allocationID, source)
	if err != nil {
		return wire.Capability{}, err
	}
	defer done()

	if cur := e.live.Load(); cur != nil && st.reg.isCurrent(cur.relay) {
		replay := cur.allocationID != "" && cur.allocationID == allocationID
		if !replay && !cur.vacant {
			return wire.Capability{}, wire.ErrRoomTaken
		}
		c, err := st.allocateOn(ctx, e, cur.relay, name, region, allocationID, source)
		if replay || !errors.Is(err, errRelayDraining) && !errors.Is(err, errRelayFull) {
			return pinned(c, err)
		}
		// A vacant room on a draining relay (or one at its connection
		// capacity): the relay let it go and took nothing, so the old
		// incarnation is fenced and the new one placed on another relay
		// below.
		st.fence(e, cur.relay.info.BootID, cur.epoch)
		e.setLive(nil)
	}
	if p := e.pending; p != nil {
		if rel := st.reg.current(p.endpoint); rel != nil && st.clock.Now().Sub(p.since) < pendingRetention {
			return pinned(st.allocateOn(ctx, e, rel, name, region, allocationID, source))
		}
		st.rooms.setPending(e, nil)
	}
	strategy := p.Strategy
	if strategy == "" {
		strategy = st.opts.Placement
	}
	cands, tally := st.reg.candidates(p, strategy, st.opts.Rand, st.clock.Now(), st.opts.RelayExpiry)
	if inRegion {
		cands = onlyRegion(cands, region)
	}
	if len(cands) == 0 {
		return wire.Capability{}, tally.noCandidate(p)
	}
	full, draining, busy := 0, 0, 0
	for i, rel := range cands {
		if i == maxPlacementTries {
			break
		}
		c, err := st.allocateOn(ctx, e, rel, name, region, allocationID, source)
		switch {
		case errors.Is(err, errRelayFull):
			full++
		case errors.Is(err, errRelayDraining):
			draining++
		case errors.Is(err, errRelayBusy):
			busy++
		case errors.Is(err, errTryNext):
		default:
			return c, err
		}
	}
	tried := min(len(cands), maxPlacementTries)
	switch {
	case busy > 0 && full+draining+busy == tried:
		// Some relay would have taken it, but every one that might was
		// at its bound of calls: a moment later it will.
		return wire.Capability{}, wire.ErrInstanceBusy
	case full+draining == tried:
		return wire.Capability{}, refusedAll(full, draining)
	}
	return wire.Capability{}, wire.ErrRelayFailed
}

// pinned maps errTryNext for an allocation that may only go to one relay
// (a replay, or a pending outcome): that relay may hold the room, so no other
// is tried.
func pinned(c wire.Capability, err error) (wire.Capability, error) {
	switch {
	case errors.Is(err, errRelayBusy):
		err = wire.ErrInstanceBusy
	case errors.Is(err, errTryNext):
		err = wire.ErrRelayFailed
	}
	return c, err
}

// errTryNext marks a relay that certainly did not take the room
// (unreachable, or draining): placement may try another.
var errTryNext = errors.New("try the next relay")

// errRelayDraining is errTryNext for a relay that answered draining: it
// holds no room of that name any more (a vacant one was released).
var errRelayDraining = fmt.Errorf("%w: the relay is draining", errTryNext)

// errRelayFull is errTryNext for a relay that answered relay_full: it
// holds as many rooms or connections as it takes (and, like a draining
// one, let a vacant room of that name go).
var errRelayFull = fmt.Errorf("%w: the relay is full", errTryNext)

// errRelayBusy is errTryNext for a relay with Options.RelayInflight
// allocation calls under way: it was not asked.
var errRelayBusy = fmt.Errorf("%w: too many allocations in flight to the relay", errTryNext)

// allocateOn calls rel's allocation route and commits the answer as the
// room's publication. The caller holds e's lease. A relay with
// Options.RelayInflight calls under way is not asked (errRelayBusy).
func (st *state) allocateOn(ctx context.Context, e *roomEntry, rel *relayEntry, name, region, allocationID, source string) (wire.Capability, error) {
	var none wire.Capability
	endpoint := rel.info.Endpoint
	indeterminate := func() (wire.Capability, error) {
		// Past maxPendingAllocations the outcome is not remembered: the
		// exact retry is placed afresh (counted).
		st.rooms.setPending(e, &pendingAlloc{allocationID: allocationID, endpoint: endpoint, since: st.clock.Now()})
		return none, wire.ErrIndeterminate
	}
	if rel.inflight.Add(1) > int32(st.opts.RelayInflight) {
		rel.inflight.Add(-1)
		return none, errRelayBusy
	}
	out, err := st.relays.callAllocate(ctx, endpoint, rel.info.BootID, name, region, allocationID)
	rel.inflight.Add(-1)
	switch {
	case err == nil:
	case errors.Is(err, errNotDelivered):
		st.log.Warn("relay unreachable for allocation", "endpoint", endpoint)
		return none, errTryNext
	case errors.Is(err, errOutcomeUnknown):
		st.log.Warn("relay allocation outcome unknown", "endpoint", endpoint, "room", name)
		return indeterminate()
	case errors.Is(err, wire.ErrRoomTaken):
		return none, wire.ErrRoomTaken
	case errors.Is(err, wire.ErrDraining), errors.Is(err, wire.ErrRetiring):
		// Draining or retiring: it certainly took no room (and released a
		// vacant one of that name).
		return none, errRelayDraining
	case errors.Is(err, wire.ErrRelayFull):
		return none, errRelayFull // it holds as many rooms (or connections) as it may: another relay

	case errors.Is(err, wire.ErrStaleBoot):
		// (Multi-machine) the machine no longer runs the boot we chose: it
		// certainly took no room.
		return none, errTryNext
	case errors.Is(err, wire.ErrRelayBadAnswer):
		return none, wire.ErrRelayBadAnswer
	default:
		st.log.Warn("relay refused allocation", "endpoint", endpoint, "err", err)
		return none, wire.ErrRelayFailed
	}

	c, pub := out.Capability, out.Publication
	if err := c.Validate(); err != nil {
		st.log.Warn("relay answered a malformed capability", "endpoint", endpoint, "err", err)
		return none, err
	}
	if pub.Name != name || (pub.AllocationID != "" && pub.AllocationID != allocationID) || validPublication(pub) != nil {
		st.log.Warn("relay answered a malformed publication", "endpoint", endpoint)
		return none, wire.ErrRelayBadAnswer.WithMessage("the relay answered an inconsistent room publication")
	}
	if pub.AllocationID == "" {
		pub.AllocationID = allocationID
	}
	// The endpoint restarted (or was removed) since we chose it: the room may
	// live on a boot we have not proven. The exact retry comes back here.
	if out.BootID != rel.info.BootID || !st.reg.isCurrent(rel) {
		return indeterminate()
	}
	switch status := st.applyPublication(e, rel, pub, source); status {
	case wire.PubApplied, wire.PubCurrent:
	case wire.PubConflict:
		cur := e.live.Load()
		if cur == nil || cur.relay != rel || (cur.allocationID != allocationID && !cur.vacant) {
			return none, wire.ErrRoomTaken
		}
		// The relay answered this allocation with a new incarnation of the
		// room (an exact replay it re-created, or a vacant room it let a new
		// allocation take over): it is authoritative for its rooms, so the
		// old one is gone.
		st.fence(e, rel.info.BootID, cur.epoch)
		e.setLive(nil)
		if status = st.applyPublication(e, rel, pub, source); status != wire.PubApplied {
			return none, wire.ErrRelayBadAnswer.WithMessage("the relay answered an inconsistent room publication")
		}
	default: // fenced (a released incarnation) or rejected (boot replaced meanwhile)
		if status == wire.PubRejected {
			return indeterminate()
		}
		return none, wire.ErrRelayBadAnswer.WithMessage("the relay answered a released room")
	}
	st.rooms.setPending(e, nil)
	c.Host = rel.info.Host
	return c, nil
}
