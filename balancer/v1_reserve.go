package balancer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/purrfly/purrfly/wire"
)

// handleReserve is POST /v1/rooms: a matchmaker reserves a named room.
// It is the allocation of /allocate_ws (state.allocate: same placement,
// same replay by allocation id, same room_name_taken for another id), and
// answers the clients' capability too.
func (s *Server) handleReserve(w http.ResponseWriter, r *http.Request) error {
	var req wire.ReserveRequest
	if err := decodeAdminBody(r, &req); err != nil {
		return err
	}
	noteAudit(r, "room "+strconv.QuoteToASCII(cut(req.Name, 64))+" allocation "+strconv.QuoteToASCII(cut(req.AllocationID, 64)))
	if err := validRoomName(req.Name); err != nil {
		return err
	}
	if req.AllocationID == "" || len(req.AllocationID) > wire.MaxAllocationIDLen || !validText(req.AllocationID) {
		return wire.ErrBadRequest.WithMessage("allocationId is required: 1 to 128 bytes of UTF-8 without control characters")
	}
	if len(req.Region) > wire.MaxRegionLen || !validText(req.Region) {
		return wire.ErrBadRequest.WithMessage("region is too long or malformed")
	}
	var strategy Strategy // "": the balancer's (BALANCER_PLACEMENT)
	if req.Strategy != "" {
		st, err := ParseStrategy(req.Strategy)
		if err != nil {
			return wire.ErrBadRequest.WithMessage(err.Error())
		}
		strategy = st
	}
	host, err := s.Allocate(r.Context(), req.Name, req.AllocationID, Placement{Region: req.Region, Labels: req.Labels, Strategy: strategy, Instance: req.Instance, Force: req.Force})
	if err != nil {
		var we *wire.Error
		if !errors.As(err, &we) {
			we = wire.ErrInternal
		}
		s.metrics.allocations.WithLabelValues(we.Code).Inc()
		if errors.Is(we, wire.ErrInstanceBusy) {
			w.Header().Set("Retry-After", "1") // as /allocate_ws: a call under way ends within a second or so
		}
		return we
	}
	s.metrics.allocationsOK.Inc()
	rec, err := s.st.reservation(req.Name, req.AllocationID)
	if err != nil {
		return err
	}
	i := rec.relay.info
	s.events.poke()
	wire.WriteJSON(w, http.StatusOK, wire.Reservation{
		Room:         roomOf(req.Name, rec),
		AllocationID: req.AllocationID,
		Host:         host,
		Client: wire.Capability{Host: i.Host, Secret: rec.clientSecret, Port: i.Port, UDPPort: i.UDPPort,
			UDPPortV2: i.UDPPortV2, SSL: i.SSL},
	})
	return nil
}

// decodeAdminBody reads one JSON object of at most maxAdminBody bytes (the v1
// guard caps the reader) into v, refusing unknown fields.
func decodeAdminBody(r *http.Request, v any) error {
	if r.Body == nil {
		return wire.ErrBadRequest.WithMessage("a JSON body is required")
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return wire.ErrBodyTooLarge
		}
		return wire.ErrBadRequest.WithMessage("failed to read the body")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return wire.ErrBadRequest.WithMessage("the body must be one JSON object of the documented fields")
	}
	if d.More() {
		return wire.ErrBadRequest.WithMessage("the body must be one JSON object")
	}
	return nil
}
