package balancer

import (
	"strings"

	"github.com/purrfly/purrfly/wire"
)

// applyPublication is the compare-and-set on a room name. rel is the
// endpoint's current registration, or nil when the publishing boot is not
// it. The caller holds e's lease.
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
func (s *Server) applyPublication(e *roomEntry, rel *relayEntry, pub wire.Publication) wire.PublicationStatus {
	if rel == nil {
		return wire.PubRejected
	}
	if e.fenced(rel.info.BootID, pub.Epoch, s.clock.Now(), s.opts.TombstoneRetention) {
		return wire.PubFenced
	}
	cur := e.live.Load()
	if cur != nil && s.reg.isCurrent(cur.relay) {
		if cur.relay != rel || cur.epoch != pub.Epoch {
			if !movedOver(cur, rel, pub) {
				return wire.PubConflict
			}
			// A handover (wire.PathHandover): the holder ended exactly this
			// incarnation and gave the room to rel. Its removal may still be
			// on its way; the tombstone makes it, and any late publication
			// of the old incarnation, a no-op.
			e.fence(cur.relay.info.BootID, cur.epoch, s.clock.Now())
			e.setLive(recordOf(rel, pub))
			return wire.PubApplied
		}
		if pub.Revision <= cur.revision {
			return wire.PubCurrent
		}
		if pub.AllocationID == "" { // fixed for the incarnation; older relays may omit it
			pub.AllocationID = cur.allocationID
		}
		e.setLive(recordOf(rel, pub))
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
	}
	e.setLive(recordOf(rel, pub))
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

func recordOf(rel *relayEntry, pub wire.Publication) *roomRecord {
	return &roomRecord{
		relay:        rel,
		epoch:        pub.Epoch,
		revision:     pub.Revision,
		connections:  pub.Connections,
		clientSecret: pub.ClientSecret,
		allocationID: pub.AllocationID,
		vacant:       pub.Vacant,
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
func (s *Server) applyRemoval(e *roomEntry, endpoint, boot string, rm wire.Removal) wire.RemovalStatus {
	now := s.clock.Now()
	if e.fenced(boot, rm.Epoch, now, s.opts.TombstoneRetention) {
		return wire.RemAlready
	}
	cur := e.live.Load()
	if cur != nil && cur.epoch == rm.Epoch && cur.relay.info.BootID == boot && cur.relay.info.Endpoint == endpoint {
		e.setLive(nil)
		e.fence(boot, rm.Epoch, now)
		return wire.RemApplied
	}
	e.fence(boot, rm.Epoch, now)
	return wire.RemSuperseded
}
