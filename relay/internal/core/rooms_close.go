package core

import (
	"github.com/purrfly/purrfly/wire"
)

// closeRoom ends room name (only incarnation epoch when it is not ""):
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
