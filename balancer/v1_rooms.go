package balancer

import (
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/purrfly/purrfly/wire"
)

// Paging of the room lists.
const (
	defaultRoomsLimit = 1000
	maxRoomsLimit     = 10000
)

// roomQuery is a parsed room list request.
type roomQuery struct {
	region   string            // case-insensitive; "" = any
	instance string            // boot id or machine id; "" = any
	boot     string            // set by /v1/instances/{id}/rooms
	labels   map[string]string // every one must match the relay's (wire.HasLabels)
	phase    string            // wire.Room* or ""
	limit    int
	after    string
}

// parseRoomQuery reads region=, instance=, label= (repeatable), phase=,
// limit= and after=; filters only when filters (GET /v1/rooms). Any other
// parameter, or a repeated one other than label, is a 400.
func parseRoomQuery(r *http.Request, filters bool) (roomQuery, error) {
	q := roomQuery{limit: defaultRoomsLimit}
	vals := r.URL.Query()
	for k, v := range vals {
		known := k == "limit" || k == "after" || filters && (k == "region" || k == "instance" || k == "label" || k == "phase")
		if !known {
			return q, wire.ErrBadRequest.WithMessage("unknown query parameter " + strconv.Quote(cut(k, 32)))
		}
		if k != "label" && len(v) != 1 {
			return q, wire.ErrBadRequest.WithMessage("query parameter " + k + " is repeated")
		}
	}
	one := func(k string, max int) (string, error) {
		v := vals.Get(k)
		if len(v) > max || !validText(v) {
			return "", wire.ErrBadRequest.WithMessage("query parameter " + k + " is too long or malformed")
		}
		return v, nil
	}
	var err error
	if q.region, err = one("region", wire.MaxRegionLen); err != nil {
		return q, err
	}
	if q.instance, err = one("instance", maxIDLen); err != nil {
		return q, err
	}
	if q.after, err = one("after", wire.MaxSessionIDLen); err != nil {
		return q, err
	}
	if q.labels, err = parseLabelFilters(vals["label"]); err != nil {
		return q, err
	}
	switch q.phase = vals.Get("phase"); q.phase {
	case "", wire.RoomWaiting, wire.RoomActive, wire.RoomVacant:
	default:
		return q, wire.ErrBadRequest.WithMessage("phase must be waiting, active or vacant")
	}
	if l := vals.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxRoomsLimit {
			return q, wire.ErrBadRequest.WithMessage("limit must be 1 to 10000")
		}
		q.limit = n
	}
	return q, nil
}

// validText reports whether s is UTF-8 without control characters.
func validText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// validRoomName is wire.CheckRoomName, the rule /allocate_ws applies.
func validRoomName(n string) error { return wire.CheckRoomName(n) }

// roomOf is the admin view of a live route.
func roomOf(name string, rec *roomRecord) wire.Room {
	i := rec.relay.info
	return wire.Room{Name: name, Region: i.Region, BootID: i.BootID, MachineID: i.MachineID, Host: i.Host,
		Epoch: rec.epoch, Phase: phaseOf(rec), Connections: rec.connections}
}

// writeRooms answers one page of q's rooms, with its ETag: a 304 costs
// the page's walk and hash, not its encoding.
func (s *Server) writeRooms(w http.ResponseWriter, r *http.Request, q roomQuery) error {
	page := s.st.roomPage(q)
	etag := page.etag()
	w.Header().Set("ETag", etag)
	if notModified(r, etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	wire.WriteJSON(w, http.StatusOK, wire.RoomsResponse{Rooms: page.rooms(), Total: int(page.total), Next: page.next})
	return nil
}

// handleRooms is GET /v1/rooms (the list) and POST /v1/rooms (a
// reservation, v1_reserve.go).
func (s *Server) handleRooms(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodPost {
		return s.handleReserve(w, r)
	}
	q, err := parseRoomQuery(r, true)
	if err != nil {
		return err
	}
	return s.writeRooms(w, r, q)
}

// handleRoom is GET /v1/rooms/{name} and DELETE (v1_close.go).
func (s *Server) handleRoom(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := validRoomName(name); err != nil {
		return err
	}
	if r.Method == http.MethodDelete {
		return s.handleCloseRoom(w, r, name)
	}
	rec, err := s.st.liveRoom(name)
	if err != nil {
		return err
	}
	wire.WriteJSON(w, http.StatusOK, roomOf(name, rec))
	return nil
}
