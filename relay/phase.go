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
//	any               -> removed   empty-room timeout, handed over, taken
//	                               over, shutdown (terminal)
//
// In pending and expired a promoted player's host socket may be connected
// (provisional: room.host is set, the room is not hosted), and ordinary
// clients that join are isolated until activation (migration.go).
// removed means the incarnation is out of the table and its removal is in
// the unregister outbox. A handed-over room starts as a new incarnation in
// awaiting phase, moved from the old one (room.movedFrom), and stays
// "moving" until the balancer confirms it (room.confirmed): that is about
// its route, not its host, so it is not a phase. Only an awaiting room at
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

// vacantLocked reports whether the room may be taken over by a new
// allocation when nobody is connected: its host left at generation 0
// (after a migration the room is reserved for recovery until it empties
// out for the empty-room timeout).
func (r *room) vacantLocked() bool { return r.phase == phaseVacant && r.mig.generation == 0 }

// reservedLocked reports whether the room is kept for a host to come (a
// migration in progress, or its allocation's host): the lease or the
// empty-room timeout ends that, never another allocation.
func (r *room) reservedLocked() bool { return !r.vacantLocked() }

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
func (r *room) hostGoneLocked() {
	r.host = nil
	r.phase = phaseVacant
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
