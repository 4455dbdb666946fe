package balancer

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/purrfly/purrfly/internal/randid"
	"github.com/purrfly/purrfly/wire"
)

// handleAllocate serves POST /allocate_ws (headers region, name,
// allocation_id) and the legacy GET (region and name only; each request gets
// a fresh allocation id, so a legacy retry of a live name is a conflict).
func (s *Server) handleAllocate(w http.ResponseWriter, r *http.Request) error {
	if ok, wait := s.allocs.Allow(wire.ClientIP(r, s.opts.ClientIPHeader)); !ok {
		s.metrics.allocations.WithLabelValues(wire.ErrRateLimited.Code).Inc()
		return wire.RateLimited(w, wait)
	}
	name, err := wire.HeaderValue(r, wire.HeaderName, wire.MaxSessionIDLen)
	if err != nil {
		return err
	}
	if err := wire.CheckRoomName(name); err != nil {
		return err
	}
	region, err := wire.OptionalHeader(r, wire.HeaderRegion, wire.MaxRegionLen)
	if err != nil {
		return err
	}
	p, explicit, err := placementQuery(r)
	if err != nil {
		return err
	}
	p.Region = region
	var allocationID string
	if r.Method == http.MethodPost {
		if allocationID, err = wire.HeaderValue(r, wire.HeaderAllocationID, wire.MaxAllocationIDLen); err != nil {
			return err
		}
	} else {
		allocationID = newAllocationID()
	}
	// Older PurrTransport versions connect the host to the relay they pinged
	// from /servers, ignoring the answer's host: a legacy allocation must
	// stay in the requested region when it has a relay.
	if s.settling() {
		return wire.ErrBalancerSettling
	}
	c, err := s.st.allocate(r.Context(), name, allocationID, p, r.Method == http.MethodGet, wire.ClientIP(r, s.opts.ClientIPHeader))
	if err != nil {
		var we *wire.Error
		if !errors.As(err, &we) {
			we = wire.ErrInternal
		}
		if !explicit && errors.Is(we, wire.ErrNoCandidate) {
			// PurrNet's own allocations ask for no placement and have
			// always been told 503 no_relays when nothing takes a room.
			we = wire.ErrNoRelays.WithMessage(we.Message)
		}
		s.metrics.allocations.WithLabelValues(we.Code).Inc()
		if errors.Is(we, wire.ErrInstanceBusy) {
			w.Header().Set("Retry-After", "1") // a call under way ends within a second or so
		}
		return we
	}
	s.metrics.allocationsOK.Inc()
	wire.WriteJSON(w, http.StatusOK, c)
	return nil
}

// placementQuery reads the placement a caller other than PurrNet may ask
// for on /allocate_ws: ?labels=k:v,k2:v2 (required labels) and
// ?strategy=least|most|random. PurrNet sends no query, so its allocations
// keep the server's placement and their errors; explicit is true when
// either parameter is present (nothing fitting is then 409 no_candidate).
func placementQuery(r *http.Request) (p Placement, explicit bool, err error) {
	if r.URL.RawQuery == "" {
		return p, false, nil
	}
	q, qerr := url.ParseQuery(r.URL.RawQuery)
	if qerr != nil {
		return p, false, wire.ErrBadRequest.WithMessage("malformed query string")
	}
	for _, k := range []string{"labels", "strategy"} {
		if len(q[k]) > 1 {
			return p, false, wire.ErrBadRequest.WithMessage("the " + k + " parameter is given more than once")
		}
	}
	if v, ok := q["labels"]; ok {
		explicit = true
		if p.Labels, err = wire.ParseLabelSelector(v[0]); err != nil {
			return p, false, wire.ErrBadRequest.WithMessage(err.Error())
		}
	}
	if v, ok := q["strategy"]; ok {
		explicit = true
		if p.Strategy, err = ParseStrategy(v[0]); err != nil {
			return p, false, wire.ErrBadRequest.WithMessage(err.Error())
		}
	}
	return p, explicit, nil
}

func newAllocationID() string { return randid.Hex(16) }

// onlyRegion keeps the candidates of region (case-insensitively) when there
// are any, else returns cands unchanged (the region has no relay that takes
// rooms: fall back to the others). candidates lists the region's first.
func onlyRegion(cands []*relayEntry, region string) []*relayEntry {
	n := 0
	for n < len(cands) && region != "" && strings.EqualFold(cands[n].info.Region, region) {
		n++
	}
	if n == 0 {
		return cands
	}
	return cands[:n]
}
