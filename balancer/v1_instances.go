package balancer

import (
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	sum := s.st.stats()
	return writeTagged(w, r, sum, sum)
}

func (s *Server) handleInstance(w http.ResponseWriter, r *http.Request) error {
	sn, err := s.st.findInstance(r.PathValue("id"))
	if err != nil {
		return err
	}
	wire.WriteJSON(w, http.StatusOK, s.st.instanceOf(sn, s.clock.Now()))
	return nil
}

// handleInstanceRooms lists the live rooms of one relay, paged like
// GET /v1/rooms (limit=, after=).
func (s *Server) handleInstanceRooms(w http.ResponseWriter, r *http.Request) error {
	sn, err := s.st.findInstance(r.PathValue("id"))
	if err != nil {
		return err
	}
	q, err := parseRoomQuery(r, false)
	if err != nil {
		return err
	}
	q.boot = sn.entry.info.BootID
	return s.writeRooms(w, r, q)
}
