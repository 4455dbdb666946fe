package core

import (
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/internal/randid"
	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// Allocation is the result of allocate.
type Allocation struct {
	HostSecret string
	Pub        wire.Publication
	Replayed   bool
}

// Allocate creates room name for allocID, or replays the allocation that
// created it. A live room under another allocation id is ErrRoomTaken,
// unless room.takeoverLocked allows (vacant, nobody connected, its
// players' recovery window over): then the new allocation takes the name
// over, and the old incarnation is removed (its epoch goes to the
// unregister outbox). A room whose host has not connected yet stays
// reserved for its allocation. An empty allocID never matches, so it
// never replays. A draining or retiring relay still replays (the answer
// may have been lost) but creates nothing: it answers ErrDraining
// (ErrRetiring), after releasing a vacant empty room of that name, so that
// the balancer places the new incarnation on another relay instead of
// answering room_name_taken for the whole drain (PurrNet reuses a scene's
// room name on every Play).
func (c *Core) Allocate(name, allocID string) (Allocation, error) {
	mu, m := c.rooms.shard(name)
	mu.Lock()
	defer mu.Unlock()
	if r := m[name]; r != nil {
		r.mu.Lock()
		if r.liveLocked() {
			if allocID != "" && r.allocationID == allocID {
				// The allocation's own capability, as it was: after a claim
				// the current host credential is the promoted player's,
				// never the original allocator's to learn.
				defer r.mu.Unlock()
				return Allocation{HostSecret: r.allocSecret, Pub: r.publicationLocked(), Replayed: true}, nil
			}
			if !r.takeoverLocked(c.activationLease, c.takesNoRooms()) {
				r.mu.Unlock()
				return Allocation{}, wire.ErrRoomTaken
			}
			// Take the vacant room over, or, draining, just let it go so
			// that the balancer places the new incarnation elsewhere. The
			// shard lock is held, so the table is updated here rather
			// than through dropRoom.
			rem := r.removeLocked()
			r.mu.Unlock()
			c.notify.RoomRemoved(rem)
			if c.takesNoRooms() {
				c.log.Info("vacant room released for a new allocation elsewhere (draining or retiring)", "room", name, "old_epoch", rem.Epoch)
			} else {
				c.log.Info("vacant room taken over by a new allocation", "room", name, "old_epoch", rem.Epoch)
			}
		} else {
			r.mu.Unlock()
		}
		delete(m, name)
		c.rooms.n.Add(-1)
	}
	if c.draining.Load() {
		return Allocation{}, wire.ErrDraining
	}
	if c.retiring.Load() {
		return Allocation{}, wire.ErrRetiring
	}
	if c.rooms.n.Load() >= int64(c.maxRooms) {
		return Allocation{}, wire.ErrRelayFull
	}
	if c.maxConns > 0 && c.conns.n.Load() >= int64(c.maxConns) {
		return Allocation{}, errConnsFull
	}
	secret := randomHex(16)
	r := &Room{
		mu:           lockrank.Mutex{Class: lockrank.Room},
		name:         name,
		incarnation:  randomHex(12),
		epoch:        randomHex(16),
		revision:     1,
		hostSecret:   secret,
		allocSecret:  secret,
		clientSecret: randomHex(16),
		allocationID: allocID,
		core:         c,
		life:         phase.New(c.clock),
		clients:      make(map[wire.ConnID]*Conn),
		emptySince:   c.clock.Now(),
		mig:          migState{fence: randomHex(16)},
	}
	m[name] = r
	c.rooms.n.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	return Allocation{HostSecret: r.hostSecret, Pub: r.publicationLocked()}, nil
}

// takesNoRooms reports whether the relay creates no room: it drains or
// retires.
func (c *Core) takesNoRooms() bool { return c.draining.Load() || c.retiring.Load() }

// errConnsFull is relay_full for a relay at its connection capacity: the
// balancer skips it as it skips one at its room capacity.
var errConnsFull = wire.ErrRelayFull.WithMessage("this relay holds as many connections as it may take")

// randomHex returns n random bytes as lower-case hex.
func randomHex(n int) string { return randid.Hex(n) }
