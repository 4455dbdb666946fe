package core

import (
	"github.com/purrfly/purrfly/wire"
)

// dropRoom takes a room marked removed out of the table and queues its
// removal for the balancer.
func (c *Core) dropRoom(r *Room, rem wire.Removal) {
	c.rooms.remove(r.name, r)
	c.notify.RoomRemoved(rem)
	c.log.Debug("room removed", "room", r.name, "epoch", rem.Epoch, "revision", rem.Revision)
}

// Expire removes rooms that have been empty for emptyTimeout, and rooms
// whose allocation's host has not connected within hostWait of their
// allocation (or adoption), whoever else is in: a room nobody hosts holds
// a slot of the relay's MAX_ROOMS for nothing, and an allocation that is
// never used must not hold it for the empty-room timeout. Their clients
// are told the host left. A room host migration reserves (vacant,
// claimed, expired lease) is never awaiting: it keeps its own windows.
func (c *Core) Expire() {
	now := c.clock.Now()
	for _, r := range c.rooms.all() {
		r.mu.Lock()
		switch {
		case !r.liveLocked():
		case r.life.AwaitingFor() >= c.hostWait:
			conns := r.takeConnsLocked()
			rem := r.removeLocked()
			for _, cn := range conns {
				cn.Close(ReasonHostLeft)
			}
			r.mu.Unlock()
			c.m.hostNeverCame.Inc()
			c.unhosted.Add(1)
			c.log.Info("room released: its host never connected", "room", r.name, "clients", len(conns))
			c.dropRoom(r, rem)
			continue
		case r.countLocked() == 0 && now.Sub(r.emptySince) >= c.emptyTimeout:
			rem := r.removeLocked()
			r.mu.Unlock()
			c.log.Info("empty room expired", "room", r.name)
			c.dropRoom(r, rem)
			continue
		}
		r.mu.Unlock()
	}
}

// RemoveAll removes every room (final shutdown).
func (c *Core) RemoveAll() {
	for _, r := range c.rooms.all() {
		r.mu.Lock()
		if !r.liveLocked() {
			r.mu.Unlock()
			continue
		}
		rem := r.removeLocked()
		r.mu.Unlock()
		c.dropRoom(r, rem)
	}
}

// CloseAll closes every open connection for reason.
func (c *Core) CloseAll(reason Reason) {
	if reason == ReasonShutdown {
		c.stopping.Store(true)
	}
	for _, cn := range c.conns.all() {
		cn.Close(reason)
	}
}

// CloseRoom ends room name (only incarnation epoch when it is not ""):
// every socket in it is closed with reasonRoomClosed under the room's
// lock (none can forward another packet), the room leaves the table and
// its removal goes to the outbox, so the name is free here at once.
func (c *Core) CloseRoom(name, epoch string) wire.RelayRoomClosed {
	r := c.rooms.get(name)
	if r == nil {
		return wire.RelayRoomClosed{}
	}
	r.mu.Lock()
	if !r.liveLocked() || (epoch != "" && r.epoch != epoch) {
		r.mu.Unlock()
		return wire.RelayRoomClosed{}
	}
	conns := r.takeConnsLocked()
	rem := r.removeLocked()
	for _, cn := range conns {
		cn.Close(ReasonRoomClosed)
	}
	out := wire.RelayRoomClosed{Closed: true, Epoch: rem.Epoch, Connections: len(conns)}
	r.mu.Unlock()
	c.dropRoom(r, rem)
	return out
}
