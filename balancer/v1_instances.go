package balancer

import (
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

// handleStats is GET /v1/stats: the fleet's sums, and the balancer's own
// state against its bounds, which its ETag leaves out (the heap moves all
// the time).
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	sum := s.st.stats()
	semantic := sum
	b := s.st.bounds()
	sum.Bounds = &b
	return writeTagged(w, r, sum, semantic)
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
