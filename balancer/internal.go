package balancer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/purrfly/purrfly/wire"
)

// internal wraps a relay -> balancer route: the allowed methods, the
// shared secret, and the protocol version on every answer (errors
// included).
func (s *Server) internal(allowed []string, h wire.Handler) http.Handler {
	checked := methods(allowed, func(w http.ResponseWriter, r *http.Request) error {
		if err := wire.CheckInternal(r, s.opts.Secret); err != nil {
			return err
		}
		return h(w, r)
	})
	return wire.Handler(func(w http.ResponseWriter, r *http.Request) error {
		wire.SetInternalVersion(w.Header())
		return checked(w, r)
	})
}

// decodeBody reads a JSON body (already capped by wire.Common). Unknown
// fields are ignored: newer relays may send more.
func decodeBody(r *http.Request, v any) error {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return wire.ErrBodyTooLarge
		}
		return wire.ErrBadRequest.WithMessage("malformed JSON body")
	}
	return nil
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) error {
	var req wire.RegisterRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := validRelayInfo(req.Relay); err != nil {
		return err
	}
	if req.Connections < 0 || req.Rooms < 0 {
		return wire.ErrBadRequest.WithMessage("counts must not be negative")
	}
	if req.HeartbeatSeconds < 0 {
		return wire.ErrBadRequest.WithMessage("heartbeatSeconds must not be negative")
	}
	req.HeartbeatSeconds = min(req.HeartbeatSeconds, maxHeartbeatSeconds)
	resp, err := s.register(r.Context(), req)
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			s.metrics.registrations.WithLabelValues(we.Code).Inc()
		}
		return err
	}
	wire.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// register applies a heartbeat. The current boot is refreshed at once. A new
// endpoint or a different boot is accepted only after the endpoint's own
// /ping reports that boot; proofs of one endpoint are serialized by its gate
// and the state is re-read once the gate is held. Accepting a different
// boot replaces the registration, which invalidates every route of the old
// boot in one step.
func (s *Server) register(ctx context.Context, req wire.RegisterRequest) (wire.RegisterResponse, error) {
	resp := wire.RegisterResponse{BalancerBoot: s.opts.BootID, Handover: true}
	endpoint, boot := req.Relay.Endpoint, req.Relay.BootID
	v, out, err := s.reg.refresh(req, s.clock.Now())
	if err != nil {
		return resp, err
	}
	if out == hbRefreshed {
		s.metrics.registrations.WithLabelValues("heartbeat").Inc()
		resp.LivenessVersion = v
		return resp, nil
	}
	release, err := s.reg.acquireGate(ctx, endpoint)
	if err != nil {
		return resp, wire.ErrBootNotProven
	}
	defer release()
	if v, out, err = s.reg.refresh(req, s.clock.Now()); err != nil {
		return resp, err
	} else if out == hbRefreshed { // proven by a concurrent heartbeat
		s.metrics.registrations.WithLabelValues("heartbeat").Inc()
		resp.LivenessVersion = v
		return resp, nil
	}
	live, err := s.probe(ctx, endpoint, s.opts.RelayTimeout)
	if err != nil {
		s.log.Info("relay boot not proven", "endpoint", endpoint, "boot", boot, "err", err)
		return resp, wire.ErrBootNotProven
	}
	if live != boot {
		if cur := s.reg.current(endpoint); (cur != nil && cur.info.BootID == live) || s.reg.isRetired(endpoint, boot) {
			return resp, wire.ErrStaleBoot
		}
		return resp, wire.ErrBootNotProven
	}
	v, replaced := s.reg.install(req, s.clock.Now())
	if replaced != "" {
		s.metrics.registrations.WithLabelValues("replaced").Inc()
		s.log.Info("relay boot replaced", "endpoint", endpoint, "boot", boot, "old_boot", replaced)
	} else {
		s.metrics.registrations.WithLabelValues("new").Inc()
		s.log.Info("relay registered", "endpoint", endpoint, "boot", boot, "region", req.Relay.Region)
	}
	resp.New, resp.Republish, resp.LivenessVersion = true, true, v
	return resp, nil
}

func (s *Server) handlePublish(w http.ResponseWriter, r *http.Request) error {
	var req wire.PublishRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	for _, p := range req.Rooms {
		if err := validPublication(p); err != nil {
			return err
		}
	}
	rel := s.reg.current(req.Endpoint)
	if rel != nil && rel.info.BootID != req.BootID {
		rel = nil
	}
	resp := wire.PublishResponse{Results: make([]wire.PublicationResult, 0, len(req.Rooms))}
	for _, p := range req.Rooms {
		st := wire.PubRejected
		if rel != nil {
			e, err := s.leaseForRelay(r.Context(), p.Name)
			if err != nil {
				return err
			}
			// Re-read under the lease: a replacement may have happened.
			if !s.reg.isCurrent(rel) {
				rel = nil
			}
			st = s.applyPublication(e, rel, p)
			s.rooms.release(e)
		}
		s.metrics.publications.WithLabelValues(string(st)).Inc()
		resp.Results = append(resp.Results, wire.PublicationResult{Name: p.Name, Epoch: p.Epoch, Status: st})
	}
	wire.WriteJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) handleUnregister(w http.ResponseWriter, r *http.Request) error {
	var req wire.UnregisterRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.BootID == "" || req.Endpoint == "" {
		return wire.ErrBadRequest.WithMessage("bootId and endpoint are required")
	}
	for _, rm := range req.Rooms {
		if rm.Name == "" || len(rm.Name) > wire.MaxSessionIDLen || rm.Epoch == "" || len(rm.Epoch) > maxIDLen {
			return wire.ErrBadRequest.WithMessage("a removal needs a name and an epoch")
		}
	}
	resp := wire.UnregisterResponse{Results: make([]wire.RemovalResult, 0, len(req.Rooms))}
	for _, rm := range req.Rooms {
		st := wire.RemRetry
		if e, err := s.leaseForRelay(r.Context(), rm.Name); err == nil {
			st = s.applyRemoval(e, req.Endpoint, req.BootID, rm)
			s.rooms.release(e)
		} else if r.Context().Err() != nil {
			return wire.ErrAllocationBusy
		}
		s.metrics.removals.WithLabelValues(string(st)).Inc()
		resp.Results = append(resp.Results, wire.RemovalResult{Name: rm.Name, Epoch: rm.Epoch, Status: st})
	}
	wire.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// leaseForRelay takes a room's lease for a relay request, waiting at most
// twice RelayTimeout (an allocation holds it for about one).
func (s *Server) leaseForRelay(ctx context.Context, name string) (*roomEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*s.opts.RelayTimeout)
	defer cancel()
	e, err := s.rooms.acquire(ctx, name)
	if err != nil {
		return nil, wire.ErrAllocationBusy.WithMessage("the room is busy; retry later")
	}
	return e, nil
}

func validRelayInfo(i wire.RelayInfo) error {
	bad := func(msg string) error { return wire.ErrBadRequest.WithMessage(msg) }
	if i.BootID == "" || len(i.BootID) > maxIDLen {
		return bad("relay bootId is missing or too long")
	}
	if !validBaseURL(i.Endpoint) {
		return bad("relay endpoint must be an http(s) base URL of at most 512 bytes")
	}
	if i.PublicEndpoint != "" && !validBaseURL(i.PublicEndpoint) {
		return bad("relay public endpoint must be an http(s) base URL of at most 512 bytes")
	}
	if i.Host == "" || len(i.Host) > 253 {
		return bad("relay host is missing or too long")
	}
	if len(i.Region) > wire.MaxRegionLen {
		return bad("relay region is too long")
	}
	if i.Port < 1 || i.Port > 65535 || i.UDPPortV2 < 1 || i.UDPPortV2 > 65535 || i.UDPPort < 0 || i.UDPPort > 65535 {
		return bad("relay ports must be in 1..65535")
	}
	if len(i.MachineID) > maxInfoLen || len(i.ImageRef) > maxInfoLen || len(i.Version) > maxInfoLen {
		return bad("relay process facts are too long")
	}
	if err := wire.ValidateLabels(i.Labels); err != nil {
		return bad("relay " + err.Error())
	}
	if err := i.Capacity.Validate(); err != nil {
		return bad("relay " + err.Error())
	}
	return nil
}

// validBaseURL reports whether s is an http(s) base URL (no query, no
// fragment) of at most maxEndpointLen bytes.
func validBaseURL(s string) bool {
	if len(s) > maxEndpointLen {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
}

func validPublication(p wire.Publication) error {
	bad := func(msg string) error { return wire.ErrBadRequest.WithMessage(msg) }
	switch {
	case p.Name == "" || len(p.Name) > wire.MaxSessionIDLen:
		return bad("a publication needs a room name of at most 128 bytes")
	case p.Epoch == "" || len(p.Epoch) > maxIDLen:
		return bad("a publication needs an epoch")
	case p.ClientSecret == "" || len(p.ClientSecret) > wire.MaxSecretLen:
		return bad("a publication needs a usable client credential")
	case p.Connections < 0:
		return bad("a publication's connection count must not be negative")
	case len(p.AllocationID) > wire.MaxAllocationIDLen:
		return bad("a publication's allocation id is too long")
	}
	return nil
}
