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
	out := s.core.CloseRoom(name, epoch)
	out.BootID = s.opts.BootID
	if out.Closed {
		s.log.Info("room closed by an operator", "room", name, "epoch", out.Epoch, "connections", out.Connections)
	}
	wire.WriteJSON(w, http.StatusOK, out)
	return nil
}
