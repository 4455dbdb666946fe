package relay

import (
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

// handleRooms is wire.PathRelayRooms: this relay's own view of its rooms,
// for operators and the chaos soak's split-brain check.
func (s *Server) handleRooms(w http.ResponseWriter, r *http.Request) error {
	out := wire.RelayRooms{BootID: s.opts.BootID, MachineID: s.opts.MachineID}
	out.Rooms, out.Truncated = s.core.RoomsView()
	wire.WriteJSON(w, http.StatusOK, out)
	return nil
}
