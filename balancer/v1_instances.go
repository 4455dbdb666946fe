package balancer

import (
	"net/http"
	"slices"
	"strings"

	"github.com/purrfly/purrfly/wire"
)

// stats sums the registered relays by region (ordered by region, compared
// case-insensitively as placement does, named as the first relay spells it).
func (s *Server) stats(snaps []relaySnap) wire.Stats {
	st := wire.Stats{Regions: []wire.RegionStats{}}
	byRegion := make(map[string]int, 8) // lower-case region -> index in st.Regions
	for _, sn := range snaps {
		i := sn.entry.info
		k := strings.ToLower(i.Region)
		idx, ok := byRegion[k]
		if !ok {
			idx = len(st.Regions)
			byRegion[k] = idx
			st.Regions = append(st.Regions, wire.RegionStats{Region: i.Region})
		}
		rs := &st.Regions[idx]
		rooms, conns := sn.entry.rooms.Load(), sn.entry.conns.Load()
		rs.Relays++
		rs.Rooms += rooms
		rs.Players += conns
		st.Relays++
		st.Rooms += rooms
		st.Players += conns
		if sn.draining {
			rs.Draining++
			st.Draining++
		}
	}
	slices.SortFunc(st.Regions, func(a, b wire.RegionStats) int {
		return strings.Compare(strings.ToLower(a.Region), strings.ToLower(b.Region))
	})
	return st
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	st := s.stats(s.reg.snapshot())
	return writeTagged(w, r, st, st)
}

// findInstance is the registered relay whose boot id or machine id is id.
func (s *Server) findInstance(id string) (relaySnap, error) {
	if id == "" || len(id) > maxIDLen {
		return relaySnap{}, wire.ErrBadRequest.WithMessage("instance id is missing or too long")
	}
	snaps := s.reg.snapshot()
	for _, sn := range snaps {
		if sn.entry.info.BootID == id {
			return sn, nil
		}
	}
	for _, sn := range snaps {
		if m := sn.entry.info.MachineID; m != "" && m == id {
			return sn, nil
		}
	}
	return relaySnap{}, wire.ErrInstanceNotFound
}

func (s *Server) handleInstance(w http.ResponseWriter, r *http.Request) error {
	sn, err := s.findInstance(r.PathValue("id"))
	if err != nil {
		return err
	}
	wire.WriteJSON(w, http.StatusOK, s.instanceOf(sn, s.clock.Now()))
	return nil
}

// handleInstanceRooms lists the live rooms of one relay, paged like
// GET /v1/rooms (limit=, after=).
func (s *Server) handleInstanceRooms(w http.ResponseWriter, r *http.Request) error {
	sn, err := s.findInstance(r.PathValue("id"))
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
