package relay

import (
	"time"

	"github.com/purrfly/purrfly/wire"
)

// phase is where a room incarnation is in its life. It is the one answer
// to "who hosts this room and what may happen to it next": every check
// and every change of it goes through the names below. The transitions:
//
//	awaiting          -> hosted    the allocation's host connects
//	hosted            -> vacant    the host leaves (with nobody else there
//	                               at generation 0 the room is removed)
//	hosted            -> pending   a claim with the live host's grant
//	vacant, expired   -> pending   a claim with the client credential
//	pending           -> hosted    the promoted host activates
//	pending           -> expired   its activation lease elapses
//	pending, expired  -> vacant    the provisional host's socket leaves
//	vacant            -> removed   a new allocation takes the name, once
//	                               the recovery window (one activation
//	                               lease) has passed with nobody there
//	any               -> removed   empty-room timeout, handed over, taken
//	                               over, shutdown (terminal)
//
// In pending and expired a promoted player's host socket may be connected
// (provisional: room.host is set, the room is not hosted), and ordinary
// clients that join are isolated until activation (migration.go).
// removed means the incarnation is out of the table and its removal is in
// the unregister outbox. A handed-over room starts as a new incarnation in
// awaiting phase, moved from the old one (room.movedFrom), which every
// publication of it names until the balancer applied one (then it is
// moot): that is about its route, not its host, so it is not a phase. Only an awaiting room at
// generation 0 is handed over, so migration state never moves.
type phase uint8

const (
	// phaseAwaiting: allocated (or adopted) and its host has not
	// connected yet: reserved for its allocation.
	phaseAwaiting phase = iota
	// phaseHosted: its host is connected and active (room.host is set):
	// the allocation's host, or a promoted host that activated.
	phaseHosted
	// phaseVacant: no host owns it (the host left, or a promoted host's
	// provisional socket did before it activated); claimable. At
	// generation 0 with nobody connected a new allocation may take the
	// name over.
	phaseVacant
	// phasePending: claimed; the promoted host's activation lease runs.
	phasePending
	// phaseExpired: the lease elapsed before activation; claimable.
	phaseExpired
	// phaseRemoved: the incarnation ended and left the table.
	phaseRemoved
)

var phaseNames = [...]string{"awaiting", "hosted", "vacant", "pending", "expired", "removed"}

func (p phase) String() string { return phaseNames[p] }

// hostPhase is the phase as /migration/current tells it. A room whose
// allocated host has not connected is "pending" (a host owns it: wait).
func (p phase) hostPhase() string {
	switch p {
	case phaseHosted:
		return wire.HostPhaseActive
	case phaseExpired:
		return wire.HostPhaseExpired
	case phaseVacant, phaseRemoved:
		return wire.HostPhaseVacant
	}
	return wire.HostPhasePending
}

// liveLocked reports whether the incarnation has not ended.
func (r *room) liveLocked() bool { return r.phase != phaseRemoved }

// vacantLocked reports whether no host owns the room (published as
// wire.Publication.Vacant: a new allocation is then put to this relay,
// which decides with takeoverLocked).
func (r *room) vacantLocked() bool { return r.phase == phaseVacant }

// takeoverLocked reports whether a new allocation may replace the room
// now. A vacant room is reserved for its players' recovery (a claim with
// the client credential) for one activation lease (recovery) after its
// host was lost; then, with nobody connected, the name is free again
// (PurrNet reuses a scene's room name on every Play). A draining relay
// lets it go at once (its rooms end with the drain anyway). Every other
// phase is reserved: for the allocation's host, or for a claimed host
// until it connects or the empty-room timeout removes the room.
func (r *room) takeoverLocked(now time.Time, recovery time.Duration, draining bool) bool {
	return r.phase == phaseVacant && r.countLocked() == 0 && (draining || now.Sub(r.mig.vacantSince) >= recovery)
}

// claimableLocked reports whether a claim may move the room to a new
// generation: no host owns it, or its live host granted the claim.
func (r *room) claimableLocked() bool {
	switch r.phase {
	case phaseHosted, phaseVacant, phaseExpired:
		return true
	}
	return false
}

// tickLocked applies what time alone changes: pending -> expired once the
// lease has elapsed. Every reader of the phase calls it first.
func (r *room) tickLocked(now time.Time) {
	if r.phase == phasePending && !now.Before(r.mig.leaseUntil) {
		r.phase = phaseExpired
	}
}

// hostArrivedLocked: the allocation's host connects (awaiting -> hosted)
// or the promoted host's provisional socket does (pending stays pending).
// Either way the host credential is now spent.
func (r *room) hostArrivedLocked(h *conn) {
	r.host = h
	r.mig.hostUsed = true
	if r.phase == phaseAwaiting {
		r.phase = phaseHosted
	}
}

// hostGoneLocked: the host's (or the provisional host's) socket left:
// hosted, pending or expired -> vacant.
func (r *room) hostGoneLocked(now time.Time) {
	r.host = nil
	r.phase = phaseVacant
	r.mig.vacantSince = now
}

// claimedLocked: -> pending, with the lease from now.
func (r *room) claimedLocked(now time.Time, lease time.Duration) {
	r.phase = phasePending
	r.mig.leaseUntil = now.Add(lease)
}

// activatedLocked: pending -> hosted.
func (r *room) activatedLocked(now time.Time) {
	r.phase = phaseHosted
	r.mig.activatedAt = now
}
