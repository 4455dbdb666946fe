package core

import (
	"time"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// Room is one room incarnation. Its fields are guarded by mu except the
// static ones; no lock is held across I/O (enqueue is not I/O).
type Room struct {
	name        string // static
	incarnation string // static: opaque, new for every allocation (and reuse of the name)

	mu           lockrank.Mutex
	epoch        string                // guarded by mu; fixed for the incarnation
	revision     uint64                // guarded by mu; bumped on every count change and on removal
	hostSecret   string                // guarded by mu; the current host credential (rotated by claims)
	allocSecret  string                // static: the allocation's own host credential, what a replay answers
	clientSecret string                // guarded by mu
	allocationID string                // guarded by mu
	movedFrom    *wire.Incarnation     // static: the incarnation a handover replaced (handover.go), else nil
	core         *Core                 // static: the core that holds it (the clock; refused phase transitions)
	life         phase.Machine         // guarded by mu: the phase (package phase), changed only by the transitions of phase.go
	host         *Conn                 // guarded by mu; the host's socket: set while hosted, and a provisional host's in pending or expired
	clients      map[wire.ConnID]*Conn // guarded by mu; every connected non-host peer the host sees
	emptySince   time.Time             // guarded by mu; zero while count() > 0
	mig          migState              // guarded by mu; host migration (migration.go)
}

// countLocked is the room's connection count (host included, as PurrLay
// counts it).
func (r *Room) countLocked() int {
	n := len(r.clients) + len(r.mig.isolated)
	if r.host != nil {
		n++
	}
	return n
}

// changedLocked records a count change: a new revision, the empty-room
// clock, and a prompt publication.
func (r *Room) changedLocked(c *Core) {
	if !r.liveLocked() {
		return
	}
	r.revision++
	if r.countLocked() == 0 {
		r.emptySince = c.clock.Now()
	} else {
		r.emptySince = time.Time{}
	}
	c.notify.RoomChanged(r)
}

// publicationLocked is the room as the balancer sees it.
func (r *Room) publicationLocked() wire.Publication {
	return wire.Publication{
		Name:         r.name,
		Epoch:        r.epoch,
		Revision:     r.revision,
		Connections:  r.countLocked(),
		ClientSecret: r.clientSecret,
		AllocationID: r.allocationID,
		Vacant:       r.vacantLocked(),
		MovedFrom:    r.movedFrom,
	}
}
