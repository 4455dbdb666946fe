package balancer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/purrfly/purrfly/internal/randid"
	"github.com/purrfly/purrfly/wire"
)

// handleAllocate serves POST /allocate_ws (headers region, name,
// allocation_id) and the legacy GET (region and name only; each request gets
// a fresh allocation id, so a legacy retry of a live name is a conflict).
func (s *Server) handleAllocate(w http.ResponseWriter, r *http.Request) error {
	if ok, wait := s.allocs.Allow(wire.ClientIP(r, s.opts.ClientIPHeader)); !ok {
		s.metrics.allocations.WithLabelValues(wire.ErrRateLimited.Code).Inc()
		return wire.RateLimited(w, wait)
	}
	name, err := wire.HeaderValue(r, wire.HeaderName, wire.MaxSessionIDLen)
	if err != nil {
		return err
	}
	region, err := wire.OptionalHeader(r, wire.HeaderRegion, wire.MaxRegionLen)
	if err != nil {
		return err
	}
	p, explicit, err := placementQuery(r)
	if err != nil {
		return err
	}
	p.Region = region
	var allocationID string
	if r.Method == http.MethodPost {
		if allocationID, err = wire.HeaderValue(r, wire.HeaderAllocationID, wire.MaxAllocationIDLen); err != nil {
			return err
		}
	} else {
		allocationID = newAllocationID()
	}
	// Older PurrTransport versions connect the host to the relay they pinged
	// from /servers, ignoring the answer's host: a legacy allocation must
	// stay in the requested region when it has a relay.
	c, err := s.allocate(r.Context(), name, allocationID, p, r.Method == http.MethodGet)
	if err != nil {
		var we *wire.Error
		if !errors.As(err, &we) {
			we = wire.ErrInternal
		}
		if !explicit && errors.Is(we, wire.ErrNoCandidate) {
			// PurrNet's own allocations ask for no placement and have
			// always been told 503 no_relays when nothing takes a room.
			we = wire.ErrNoRelays.WithMessage(we.Message)
		}
		s.metrics.allocations.WithLabelValues(we.Code).Inc()
		return we
	}
	s.metrics.allocationsOK.Inc()
	wire.WriteJSON(w, http.StatusOK, c)
	return nil
}

// placementQuery reads the placement a caller other than PurrNet may ask
// for on /allocate_ws: ?labels=k:v,k2:v2 (required labels) and
// ?strategy=least|most|random. PurrNet sends no query, so its allocations
// keep the server's placement and their errors; explicit is true when
// either parameter is present (nothing fitting is then 409 no_candidate).
func placementQuery(r *http.Request) (p Placement, explicit bool, err error) {
	if r.URL.RawQuery == "" {
		return p, false, nil
	}
	q, qerr := url.ParseQuery(r.URL.RawQuery)
	if qerr != nil {
		return p, false, wire.ErrBadRequest.WithMessage("malformed query string")
	}
	for _, k := range []string{"labels", "strategy"} {
		if len(q[k]) > 1 {
			return p, false, wire.ErrBadRequest.WithMessage("the " + k + " parameter is given more than once")
		}
	}
	if v, ok := q["labels"]; ok {
		explicit = true
		if p.Labels, err = wire.ParseLabelSelector(v[0]); err != nil {
			return p, false, wire.ErrBadRequest.WithMessage(err.Error())
		}
	}
	if v, ok := q["strategy"]; ok {
		explicit = true
		if p.Strategy, err = ParseStrategy(v[0]); err != nil {
			return p, false, wire.ErrBadRequest.WithMessage(err.Error())
		}
	}
	return p, explicit, nil
}

func newAllocationID() string { return randid.Hex(16) }

// allocate places (or replays) the allocation of name under the room's
// lease, which it holds across the relay call so that concurrent
// allocations of one name are decided one after the other:
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
func (s *Server) allocate(ctx context.Context, name, allocationID string, p Placement, inRegion bool) (wire.Capability, error) {
	region := p.Region
	e, err := s.rooms.acquire(ctx, name)
	if err != nil {
		return wire.Capability{}, wire.ErrAllocationBusy
	}
	defer s.rooms.release(e)

	if cur := e.live.Load(); cur != nil && s.reg.isCurrent(cur.relay) {
		replay := cur.allocationID != "" && cur.allocationID == allocationID
		if !replay && !cur.vacant {
			return wire.Capability{}, wire.ErrRoomTaken
		}
		c, err := s.allocateOn(ctx, e, cur.relay, name, region, allocationID)
		if replay || !errors.Is(err, errRelayDraining) && !errors.Is(err, errRelayFull) {
			return pinned(c, err)
		}
		// A vacant room on a draining relay (or one at its connection
		// capacity): the relay let it go and took nothing, so the old
		// incarnation is fenced and the new one placed on another relay
		// below.
		e.fence(cur.relay.info.BootID, cur.epoch, s.clock.Now())
		e.setLive(nil)
	}
	if p := e.pending; p != nil {
		if rel := s.reg.current(p.endpoint); rel != nil && s.clock.Now().Sub(p.since) < pendingRetention {
			return pinned(s.allocateOn(ctx, e, rel, name, region, allocationID))
		}
		e.pending = nil
	}
	strategy := p.Strategy
	if strategy == "" {
		strategy = s.opts.Placement
	}
	cands, tally := s.reg.candidates(p, strategy, s.opts.Rand)
	if inRegion {
		cands = onlyRegion(cands, region)
	}
	if len(cands) == 0 {
		return wire.Capability{}, tally.noCandidate(p)
	}
	full, draining := 0, 0
	for i, rel := range cands {
		if i == maxPlacementTries {
			break
		}
		c, err := s.allocateOn(ctx, e, rel, name, region, allocationID)
		switch {
		case errors.Is(err, errRelayFull):
			full++
		case errors.Is(err, errRelayDraining):
			draining++
		case errors.Is(err, errTryNext):
		default:
			return c, err
		}
	}
	if tried := min(len(cands), maxPlacementTries); full+draining == tried {
		return wire.Capability{}, refusedAll(full, draining)
	}
	return wire.Capability{}, wire.ErrRelayFailed
}

// pinned maps errTryNext for an allocation that may only go to one relay
// (a replay, or a pending outcome): that relay may hold the room, so no other
// is tried.
func pinned(c wire.Capability, err error) (wire.Capability, error) {
	if errors.Is(err, errTryNext) {
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

// allocateOn calls rel's allocation route and commits the answer as the
// room's publication. The caller holds e's lease.
func (s *Server) allocateOn(ctx context.Context, e *roomEntry, rel *relayEntry, name, region, allocationID string) (wire.Capability, error) {
	var none wire.Capability
	endpoint := rel.info.Endpoint
	indeterminate := func() (wire.Capability, error) {
		e.pending = &pendingAlloc{allocationID: allocationID, endpoint: endpoint, since: s.clock.Now()}
		return none, wire.ErrIndeterminate
	}
	out, err := s.callAllocate(ctx, endpoint, rel.info.BootID, name, region, allocationID)
	switch {
	case err == nil:
	case errors.Is(err, errNotDelivered):
		s.log.Warn("relay unreachable for allocation", "endpoint", endpoint)
		return none, errTryNext
	case errors.Is(err, errOutcomeUnknown):
		s.log.Warn("relay allocation outcome unknown", "endpoint", endpoint, "room", name)
		return indeterminate()
	case errors.Is(err, wire.ErrRoomTaken):
		return none, wire.ErrRoomTaken
	case errors.Is(err, wire.ErrDraining):
		// Draining: it certainly took no room (and released a vacant one
		// of that name).
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
		s.log.Warn("relay refused allocation", "endpoint", endpoint, "err", err)
		return none, wire.ErrRelayFailed
	}

	c, pub := out.Capability, out.Publication
	if err := c.Validate(); err != nil {
		s.log.Warn("relay answered a malformed capability", "endpoint", endpoint, "err", err)
		return none, err
	}
	if pub.Name != name || (pub.AllocationID != "" && pub.AllocationID != allocationID) || validPublication(pub) != nil {
		s.log.Warn("relay answered a malformed publication", "endpoint", endpoint)
		return none, wire.ErrRelayBadAnswer.WithMessage("the relay answered an inconsistent room publication")
	}
	if pub.AllocationID == "" {
		pub.AllocationID = allocationID
	}
	// The endpoint restarted (or was removed) since we chose it: the room may
	// live on a boot we have not proven. The exact retry comes back here.
	if out.BootID != rel.info.BootID || !s.reg.isCurrent(rel) {
		return indeterminate()
	}
	switch st := s.applyPublication(e, rel, pub); st {
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
		e.fence(rel.info.BootID, cur.epoch, s.clock.Now())
		e.setLive(nil)
		if st = s.applyPublication(e, rel, pub); st != wire.PubApplied {
			return none, wire.ErrRelayBadAnswer.WithMessage("the relay answered an inconsistent room publication")
		}
	default: // fenced (a released incarnation) or rejected (boot replaced meanwhile)
		if st == wire.PubRejected {
			return indeterminate()
		}
		return none, wire.ErrRelayBadAnswer.WithMessage("the relay answered a released room")
	}
	e.pending = nil
	c.Host = rel.info.Host
	return c, nil
}

// onlyRegion keeps the candidates of region (case-insensitively) when there
// are any, else returns cands unchanged (the region has no relay that takes
// rooms: fall back to the others). candidates lists the region's first.
func onlyRegion(cands []*relayEntry, region string) []*relayEntry {
	n := 0
	for n < len(cands) && region != "" && strings.EqualFold(cands[n].info.Region, region) {
		n++
	}
	if n == 0 {
		return cands
	}
	return cands[:n]
}
