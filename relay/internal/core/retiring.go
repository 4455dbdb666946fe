package core

import (
	"time"

	"github.com/purrfly/purrfly/relay/internal/core/phase"
)

// ReleaseRecovered releases, on a retiring relay (its retire loop calls
// it), the live rooms nobody is connected to whose players' recovery
// window (one activation lease since they emptied, or since the host was
// lost) is over and that no claim holds (a pending activation lease).
func (c *Core) ReleaseRecovered(now time.Time) {
	for _, r := range c.rooms.all() {
		r.mu.Lock()
		release := r.liveLocked() && r.countLocked() == 0 && r.phaseLocked() != phase.Pending &&
			now.Sub(r.emptySince) >= c.activationLease &&
			(!r.vacantLocked() || r.life.VacantFor() >= c.activationLease)
		if !release {
			r.mu.Unlock()
			continue
		}
		rem := r.removeLocked()
		r.mu.Unlock()
		c.log.Info("empty room released (retiring)", "room", r.name)
		c.dropRoom(r, rem)
	}
}
