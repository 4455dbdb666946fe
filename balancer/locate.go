package balancer

import (
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

// handleRoomLocation answers which registered relay holds a live room
// (wire.PathRoomLocation, ?name=). The machines of a multi-machine relay
// app ask it for rooms they do not hold, to hand a connection to the
// holder. Like /join it reads the route without the lease and answers
// room_not_found for a route whose registration was replaced or removed
// (a stopped or failed machine): such a room is gone, not half-alive.
func (s *Server) handleRoomLocation(w http.ResponseWriter, r *http.Request) error {
	name := r.URL.Query().Get("name")
	if name == "" || len(name) > wire.MaxSessionIDLen {
		return wire.ErrBadRequest.WithMessage("name must be a room name of 1 to 128 bytes")
	}
	rec, err := s.st.liveRoom(name)
	if err != nil {
		return s.unsettled(err)
	}
	i := rec.relay.info
	wire.WriteJSON(w, http.StatusOK, wire.RoomLocation{
		Name:      name,
		BootID:    i.BootID,
		MachineID: i.MachineID,
		Endpoint:  i.Endpoint,
		Host:      i.Host,
		Port:      i.Port,
		Region:    i.Region,

		Connections: rec.connections,
	})
	return nil
}
