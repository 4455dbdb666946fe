package relay

import (
	"net/http"
	"sort"

	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// handleRooms is wire.PathRelayRooms: this relay's own view of its rooms,
// for operators and the chaos soak's split-brain check. Each room's lock is
// taken only to copy its fields.
func (s *Server) handleRooms(w http.ResponseWriter, r *http.Request) error {
	all := s.core.rooms.all()
	out := wire.RelayRooms{BootID: s.opts.BootID, MachineID: s.opts.MachineID, Rooms: make([]wire.RelayRoom, 0, min(len(all), wire.MaxRelayRoomsListed))}
	for _, rm := range all {
		if len(out.Rooms) == wire.MaxRelayRoomsListed {
			out.Truncated = true
			break
		}
		rm.mu.Lock()
		ph := rm.phaseLocked()
		out.Rooms = append(out.Rooms, wire.RelayRoom{Name: rm.name, Epoch: rm.epoch, Phase: ph.String(),
			Hosted: rm.host != nil && ph == phase.Hosted, Connections: rm.countLocked()})
		rm.mu.Unlock()
	}
	sort.Slice(out.Rooms, func(i, j int) bool { return out.Rooms[i].Name < out.Rooms[j].Name })
	wire.WriteJSON(w, http.StatusOK, out)
	return nil
}
