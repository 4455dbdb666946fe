package balancer

import (
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

// handleCloseRoom is DELETE /v1/rooms/{name}: under the room's lease, the
// relay holding the live route closes that incarnation
// (wire.PathRelayRoomClose: every socket closed, the name released
// there), then the route is tombstoned and dropped here, so the name is
// free at once. Idempotent: a name released before (it still has a
// tombstone) answers 200 closed=false; a name never known here is 404
// room_not_found. A relay that cannot confirm is 502 relay_unavailable
// (retry: the close is idempotent at the relay too).
func (s *Server) handleCloseRoom(w http.ResponseWriter, r *http.Request, name string) error {
	out, err := s.st.closeRoom(r.Context(), name)
	if err != nil {
		return err
	}
	s.events.poke()
	wire.WriteJSON(w, http.StatusOK, out)
	return nil
}
