package core

import (
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// Adopt creates a handed-over room here: a new incarnation with the old
// one's credentials and allocation id (so a replay of its allocation still
// answers the same host secret), published as moved from the old one. It
// returns nil when a live room of that name is already here.
func (c *Core) Adopt(h wire.HandoverResponse, from wire.Incarnation) *Room {
	mu, m := c.rooms.shard(h.Name)
	mu.Lock()
	defer mu.Unlock()
	if r := m[h.Name]; r != nil {
		r.mu.Lock()
		live := r.liveLocked()
		r.mu.Unlock()
		if live {
			return nil
		}
	} else {
		c.rooms.n.Add(1)
	}
	inc := h.Incarnation
	if inc == "" {
		inc = randomHex(12) // a holder from before host migration
	}
	r := &Room{
		mu:           lockrank.Mutex{Class: lockrank.Room},
		name:         h.Name,
		incarnation:  inc,
		epoch:        randomHex(16),
		revision:     1,
		hostSecret:   h.HostSecret,
		allocSecret:  h.HostSecret, // only an awaiting room moves: still the allocation's
		clientSecret: h.ClientSecret,
		allocationID: h.AllocationID,
		movedFrom:    &from,
		core:         c,
		life:         phase.New(c.clock),
		clients:      make(map[wire.ConnID]*Conn),
		emptySince:   c.clock.Now(),
		mig:          migState{fence: randomHex(16)},
	}
	if h.Vacant {
		r.moved(r.life.AdoptedVacant()) // its host had left at the holder
	}
	m[h.Name] = r
	r.mu.Lock()
	c.notify.RoomChanged(r)
	r.mu.Unlock()
	return r
}

// EndRoom removes r and closes everyone in it for reason (its removal goes
// to the outbox): a handed-over room whose publication the balancer
// refused, so that a room is never live on two machines.
func (c *Core) EndRoom(r *Room, reason Reason) {
	c.endRoomIf(r, reason, func() bool { return true })
}

// endRoomIf is endRoom when cond, checked under r's lock, holds.
func (c *Core) endRoomIf(r *Room, reason Reason, cond func() bool) bool {
	r.mu.Lock()
	if !r.liveLocked() || !cond() {
		r.mu.Unlock()
		return false
	}
	conns := r.takeConnsLocked()
	rem := r.removeLocked()
	// Closed under the lock: none of them can forward another packet.
	for _, cn := range conns {
		cn.Close(reason)
	}
	r.mu.Unlock()
	c.dropRoom(r, rem)
	return true
}

// HandOver ends room name for a handover when secret is its host secret
// and nobody is connected to it, and returns its credentials (From.BootID
// is the caller's to fill). The incarnation's removal goes to the outbox
// as any other.
func (c *Core) HandOver(name, secret string) (wire.HandoverResponse, bool) {
	r := c.rooms.get(name)
	if r == nil {
		return wire.HandoverResponse{}, false
	}
	r.mu.Lock()
	// Only a room still awaiting its allocation's host moves: a hosted or
	// migrated one keeps its migration state where it is.
	if r.phaseLocked() != phase.Awaiting || r.mig.generation != 0 || r.countLocked() > 0 || !wire.SecretEqual(secret, r.hostSecret) {
		r.mu.Unlock()
		return wire.HandoverResponse{}, false
	}
	h := wire.HandoverResponse{
		Name:         r.name,
		HostSecret:   r.hostSecret,
		ClientSecret: r.clientSecret,
		AllocationID: r.allocationID,
		Incarnation:  r.incarnation,
		From:         wire.Incarnation{Epoch: r.epoch},
	}
	rem := r.removeLocked()
	r.mu.Unlock()
	c.dropRoom(r, rem)
	return h, true
}
