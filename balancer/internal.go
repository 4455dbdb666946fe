package balancer

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/purrfly/purrfly/wire"
)

// internal wraps a relay -> balancer route: the allowed methods, the
// shared secret under its source's failed-auth throttle (secretGuard), and
// the protocol version on every answer (errors included).
func (s *Server) internal(allowed []string, h wire.Handler) http.Handler {
	checked := methods(allowed, func(w http.ResponseWriter, r *http.Request) error {
		if err := s.secretGuard(w, r, wire.CheckInternal); err != nil {
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
	reg, err := s.st.register(r.Context(), req)
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			s.metrics.registrations.WithLabelValues(we.Code).Inc()
		}
		return err
	}
	s.metrics.registrations.WithLabelValues(reg.outcome).Inc()
	resp := wire.RegisterResponse{BalancerBoot: s.opts.BootID, Handover: true, LivenessVersion: reg.liveness,
		AdminDrained: s.st.reg.isDrained(req.Relay.Endpoint, req.Relay.BootID)}
	if reg.outcome != "heartbeat" {
		resp.New, resp.Republish = true, true
	}
	wire.WriteJSON(w, http.StatusOK, resp)
	return nil
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
	results, err := s.st.publish(r.Context(), req)
	if err != nil {
		return err
	}
	for _, res := range results {
		s.metrics.publications.WithLabelValues(string(res.Status)).Inc()
	}
	wire.WriteJSON(w, http.StatusOK, wire.PublishResponse{Results: results})
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
	results, err := s.st.unregister(r.Context(), req)
	if err != nil {
		return err
	}
	for _, res := range results {
		s.metrics.removals.WithLabelValues(string(res.Status)).Inc()
	}
	wire.WriteJSON(w, http.StatusOK, wire.UnregisterResponse{Results: results})
	return nil
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
