package relay

import (
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

// handleRoomClose is wire.PathRelayRoomClose: the balancer closes a room
// for an operator. Idempotent: a room that is not here (or is another
// incarnation than HeaderRoomEpoch names) answers Closed false.
func (s *Server) handleRoomClose(w http.ResponseWriter, r *http.Request) error {
	name, err := wire.HeaderValue(r, wire.HeaderName, wire.MaxSessionIDLen)
	if err != nil {
		return err
	}
	epoch, err := wire.OptionalHeader(r, wire.HeaderRoomEpoch, 128)
	if err != nil {
		return err
	}
	out := s.core.closeRoom(name, epoch)
	out.BootID = s.opts.BootID
	if out.Closed {
		s.log.Info("room closed by an operator", "room", name, "epoch", out.Epoch, "connections", out.Connections)
	}
	wire.WriteJSON(w, http.StatusOK, out)
	return nil
}

// closeRoom ends room name (only incarnation epoch when it is not ""):
// every socket in it is closed with reasonRoomClosed under the room's
// lock (none can forward another packet), the room leaves the table and
// its removal goes to the outbox, so the name is free here at once.
func (c *core) closeRoom(name, epoch string) wire.RelayRoomClosed {
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
		cn.close(reasonRoomClosed)
	}
	out := wire.RelayRoomClosed{Closed: true, Epoch: rem.Epoch, Connections: len(conns)}
	r.mu.Unlock()
	c.dropRoom(r, rem)
	return out
}
