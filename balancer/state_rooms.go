package balancer

import (
	"context"
	"errors"
	"strings"

	"github.com/purrfly/purrfly/wire"
)

// publish applies a relay's publications one room at a time, each under
// its room's lease. Publications of a boot that is not the endpoint's
// current registration are all rejected; the registration is re-read
// under every lease, since a replacement may have happened meanwhile.
func (st *state) publish(ctx context.Context, req wire.PublishRequest) ([]wire.PublicationResult, error) {
	rel := st.reg.current(req.Endpoint)
	if rel != nil && rel.info.BootID != req.BootID {
		rel = nil
	}
	out := make([]wire.PublicationResult, 0, len(req.Rooms))
	for _, p := range req.Rooms {
		status := wire.PubRejected
		if rel != nil {
			e, err := st.leaseForRelay(ctx, p.Name)
			if err != nil {
				return nil, err
			}
			if !st.reg.isCurrent(rel) {
				rel = nil
			}
			status = st.applyPublication(e, rel, p, "")
			st.rooms.release(e)
		}
		out = append(out, wire.PublicationResult{Name: p.Name, Epoch: p.Epoch, Status: status})
	}
	return out, nil
}

// unregister applies a relay's outbox one removal at a time, each under
// its room's lease. A removal whose lease stays busy is answered retry; a
// request given up by its caller is allocation_in_progress.
func (st *state) unregister(ctx context.Context, req wire.UnregisterRequest) ([]wire.RemovalResult, error) {
	out := make([]wire.RemovalResult, 0, len(req.Rooms))
	for _, rm := range req.Rooms {
		status := wire.RemRetry
		if e, err := st.leaseForRelay(ctx, rm.Name); err == nil {
			status = st.applyRemoval(e, req.Endpoint, req.BootID, rm)
			st.rooms.release(e)
		} else if ctx.Err() != nil {
			return nil, wire.ErrAllocationBusy
		}
		out = append(out, wire.RemovalResult{Name: rm.Name, Epoch: rm.Epoch, Status: status})
	}
	return out, nil
}

// applyPublication is the compare-and-set on a room name. rel is the
// endpoint's current registration, or nil when the publishing boot is not
// it; source is the address whose allocation made the room ("" for a
// relay's own publication), recorded when the name is acquired (an update
// of the same incarnation keeps the one it had). The caller holds e's
// lease.
//
//   - not the endpoint's live boot                   -> PubRejected
//   - this exact incarnation (boot, epoch) is tombstoned -> PubFenced
//   - a live route of this boot and epoch:
//     newer revision                                 -> PubApplied (count updated)
//     same or older revision                         -> PubCurrent
//   - a live route of another epoch or boot          -> PubConflict,
//     unless the publication names that exact
//     incarnation as the one it moved from (a
//     handover between machines of one app)          -> PubApplied (moved)
//   - no live route (unknown, released, or its
//     registration was replaced/removed)             -> PubApplied (acquired)
func (st *state) applyPublication(e *roomEntry, rel *relayEntry, pub wire.Publication, source string) wire.PublicationStatus {
	if rel == nil {
		return wire.PubRejected
	}
	if st.fenced(e, rel.info.BootID, pub.Epoch) {
		return wire.PubFenced
	}
	cur := e.live.Load()
	if cur != nil && st.reg.isCurrent(cur.relay) {
		if cur.relay != rel || cur.epoch != pub.Epoch {
			if !movedOver(cur, rel, pub) {
				return wire.PubConflict
			}
			// A handover (wire.PathHandover): the holder ended exactly this
			// incarnation and gave the room to rel. Its removal may still be
			// on its way; the tombstone makes it, and any late publication
			// of the old incarnation, a no-op.
			st.fence(e, cur.relay.info.BootID, cur.epoch)
			e.setLive(recordOf(rel, pub, cur.source)) // the same game: still its allocator's
			return wire.PubApplied
		}
		if pub.Revision <= cur.revision {
			return wire.PubCurrent
		}
		if pub.AllocationID == "" { // fixed for the incarnation; older relays may omit it
			pub.AllocationID = cur.allocationID
		}
		e.setLive(recordOf(rel, pub, cur.source))
		return wire.PubApplied
	}
	// The name is free. An orphaned route of this same boot and epoch (its
	// registration was removed by a health check and came back) is adopted
	// again, keeping the newer of the two revisions and, as above, its
	// allocation id.
	if cur != nil && cur.relay.info.BootID == rel.info.BootID && cur.epoch == pub.Epoch {
		if cur.revision > pub.Revision {
			rec := *cur
			rec.relay = rel
			e.setLive(&rec)
			return wire.PubApplied
		}
		if pub.AllocationID == "" {
			pub.AllocationID = cur.allocationID
		}
		source = cur.source
	}
	e.setLive(recordOf(rel, pub, source))
	return wire.PubApplied
}

// movedOver reports whether pub, from rel, is the handover of exactly the
// live incarnation cur to another machine of the same relay app (same
// public host and port: clients reach both the same way).
func movedOver(cur *roomRecord, rel *relayEntry, pub wire.Publication) bool {
	from := pub.MovedFrom
	return from != nil && cur.relay != rel &&
		cur.relay.info.BootID == from.BootID && cur.epoch == from.Epoch &&
		strings.EqualFold(cur.relay.info.Host, rel.info.Host) && cur.relay.info.Port == rel.info.Port
}

// recordOf is the route of pub, made by source's allocation ("": none).
func recordOf(rel *relayEntry, pub wire.Publication, source string) *roomRecord {
	return &roomRecord{
		relay:        rel,
		epoch:        pub.Epoch,
		revision:     pub.Revision,
		connections:  pub.Connections,
		clientSecret: pub.ClientSecret,
		allocationID: pub.AllocationID,
		vacant:       pub.Vacant,
		source:       source,
	}
}

// applyRemoval applies one outbox entry of (endpoint, boot). The caller
// holds e's lease.
//
//   - this exact epoch is already tombstoned            -> RemAlready
//   - the live route is this boot's epoch               -> RemApplied (tombstoned)
//   - another incarnation owns the name, or none is known -> RemSuperseded
//
// A removal names one incarnation exactly (boot and epoch are never reused)
// and is the relay's last word on it, so it is applied whatever revision it
// carries and whether or not the boot is currently registered: refusing an
// older revision could never be repaired by a retry (the relay has no newer
// revision to send) and would leave a ghost route. The tombstone also
// records epochs the balancer never saw (it restarted while the room
// lived), so a delayed publication of them stays fenced.
func (st *state) applyRemoval(e *roomEntry, endpoint, boot string, rm wire.Removal) wire.RemovalStatus {
	if st.fenced(e, boot, rm.Epoch) {
		return wire.RemAlready
	}
	cur := e.live.Load()
	if cur != nil && cur.epoch == rm.Epoch && cur.relay.info.BootID == boot && cur.relay.info.Endpoint == endpoint {
		e.setLive(nil)
		st.fence(e, boot, rm.Epoch)
		return wire.RemApplied
	}
	st.fence(e, boot, rm.Epoch)
	return wire.RemSuperseded
}

// closeRoom closes name's live incarnation at its relay and drops the
// route here, under the room's lease (handleCloseRoom says how it answers).
func (st *state) closeRoom(ctx context.Context, name string) (wire.RoomClosed, error) {
	if st.rooms.get(name) == nil {
		if st.tombs.released(name, st.clock.Now()) {
			return wire.RoomClosed{Name: name}, nil
		}
		return wire.RoomClosed{}, wire.ErrRoomNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, 2*st.opts.RelayTimeout)
	defer cancel()
	e, err := st.rooms.acquire(ctx, name)
	if err != nil {
		return wire.RoomClosed{}, wire.ErrAllocationBusy
	}
	defer st.rooms.release(e)
	cur := e.live.Load()
	if cur == nil || !st.reg.isCurrent(cur.relay) {
		if st.tombs.released(name, st.clock.Now()) {
			return wire.RoomClosed{Name: name}, nil
		}
		return wire.RoomClosed{}, wire.ErrRoomNotFound
	}
	out, err := st.relays.closeRoom(ctx, cur.relay.info.Endpoint, name, cur.epoch)
	if err != nil {
		st.log.Warn("relay did not confirm a room close", "endpoint", cur.relay.info.Endpoint, "room", name, "err", err)
		if errors.Is(err, wire.ErrNotFound) {
			return wire.RoomClosed{}, wire.ErrRelayFailed.WithMessage("the relay cannot close rooms (upgrade it)")
		}
		return wire.RoomClosed{}, wire.ErrRelayFailed.WithMessage("the relay did not confirm the close; retry")
	}
	// The relay closed that incarnation, or no longer had it (Closed
	// false: it ended meanwhile); either way the route here is gone. A newer
	// incarnation the relay holds publishes under its own epoch.
	st.fence(e, cur.relay.info.BootID, cur.epoch)
	e.setLive(nil)
	return wire.RoomClosed{Name: name, Closed: out.Closed, Connections: out.Connections}, nil
}
