package core

import (
	"time"

	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// A room incarnation's life is its phase machine (package phase: the
// transitions, where each may start, the clock applied on every read).
// These are the room's side of it: what goes with each transition (the
// host's socket, the spent credential) and the questions asked of the
// phase. A transition refused here is a bug: the core logs it and counts
// it (Core.refusedPhase), and ConsistencyCheck reports it, so every test
// that checks a relay's consistency fails on one.

// phaseLocked is the room's phase, read through the machine (the lease
// applied).
func (r *Room) phaseLocked() phase.Phase { return r.life.Now() }

// hostPhase is the phase as /migration/current tells it. A room whose
// allocated host has not connected is "pending" (a host owns it: wait).
func hostPhase(p phase.Phase) string {
	switch p {
	case phase.Hosted:
		return wire.HostPhaseActive
	case phase.Expired:
		return wire.HostPhaseExpired
	case phase.Vacant, phase.Removed:
		return wire.HostPhaseVacant
	}
	return wire.HostPhasePending
}

// liveLocked reports whether the incarnation has not ended.
func (r *Room) liveLocked() bool { return r.life.Live() }

// vacantLocked reports whether no host owns the room (published as
// wire.Publication.Vacant: a new allocation is then put to this relay,
// which decides with takeoverLocked).
func (r *Room) vacantLocked() bool { return r.phaseLocked() == phase.Vacant }

// takeoverLocked reports whether a new allocation may replace the room
// now. A vacant room is reserved for its players' recovery (a claim with
// the client credential) for one activation lease (recovery) after its
// host was lost; then, with nobody connected, the name is free again
// (PurrNet reuses a scene's room name on every Play). A draining relay
// lets it go at once (its rooms end with the drain anyway). Every other
// phase is reserved: for the allocation's host, or for a claimed host
// until it connects or the empty-room timeout removes the room.
func (r *Room) takeoverLocked(recovery time.Duration, draining bool) bool {
	return r.vacantLocked() && r.countLocked() == 0 && (draining || r.life.VacantFor() >= recovery)
}

// claimableLocked reports whether a claim may move the room to a new
// generation: no host owns it, or its live host granted the claim.
func (r *Room) claimableLocked() bool {
	switch r.phaseLocked() {
	case phase.Hosted, phase.Vacant, phase.Expired:
		return true
	}
	return false
}

// isolatingLocked reports whether a joining client is isolated (or the
// lane): a claimed host has not activated.
func (r *Room) isolatingLocked() bool {
	p := r.phaseLocked()
	return p == phase.Pending || p == phase.Expired
}

// hostMayConnectLocked reports whether the host credential may still be
// spent: by the allocation's host before the room was ever hosted, or by
// the promoted host within its lease.
func (r *Room) hostMayConnectLocked() bool {
	p := r.phaseLocked()
	return !r.mig.hostUsed && r.host == nil && (p == phase.Awaiting || p == phase.Pending)
}

// hostArrivedLocked: the allocation's host connects (awaiting -> hosted)
// or the promoted host's provisional socket does (pending stays pending).
// Either way the host credential is now spent.
func (r *Room) hostArrivedLocked(h *Conn) {
	if r.moved(r.life.HostArrived()) {
		r.host = h
		r.mig.hostUsed = true
	}
}

// hostGoneLocked: the host's (or the provisional host's) socket left:
// hosted, pending or expired -> vacant.
func (r *Room) hostGoneLocked() {
	if r.moved(r.life.HostGone()) {
		r.host = nil
	}
}

// claimedLocked: -> pending, the activation lease running until until.
func (r *Room) claimedLocked(until time.Time) bool { return r.moved(r.life.Claimed(until)) }

// activatedLocked: pending -> hosted.
func (r *Room) activatedLocked() bool { return r.moved(r.life.Activated()) }

// removeLocked ends the incarnation and returns its outbox entry. The
// caller then drops it from the table (Core.dropRoom) after unlocking.
func (r *Room) removeLocked() wire.Removal {
	r.moved(r.life.Remove())
	r.revision++
	return wire.Removal{Name: r.name, Epoch: r.epoch, Revision: r.revision}
}

// moved reports whether a transition happened, and hands a refused one
// to the core.
func (r *Room) moved(err error) bool {
	if err != nil {
		r.core.refusedPhase(r, err)
		return false
	}
	return true
}
