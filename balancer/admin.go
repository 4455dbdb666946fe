package balancer

import (
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

// The deploy tool's routes (GET /v1/instances, POST
// /v1/instances/{id}/drain and /undrain) take an admin key or the shared
// SECRET (adminRoute.legacySecret); v1_instances.go has the operator's.

// Instances lists the registered relays, ordered by endpoint, as GET
// /v1/instances does (for embedding callers such as a local dev stack).
func (s *Server) Instances() []wire.Instance { return s.st.instances() }

// semanticInstances drops what changes with every heartbeat (the ETag
// covers the rest).
func semanticInstances(l []wire.Instance) []wire.Instance {
	out := make([]wire.Instance, len(l))
	for i, in := range l {
		in.LastHeartbeat = ""
		out[i] = in
	}
	return out
}

func (s *Server) handleInstances(w http.ResponseWriter, r *http.Request) error {
	l := s.st.instances()
	return writeTagged(w, r, wire.InstancesResponse{Instances: l}, semanticInstances(l))
}

// handleDrain marks the relay whose boot id or machine id is {id} as
// draining: no new room is placed there (its rooms keep working). The mark
// survives the relay's removal and return within the same boot, and ends
// with the boot. Draining a drained relay changes nothing and answers 200.
func (s *Server) handleDrain(w http.ResponseWriter, r *http.Request) error {
	return s.setDrain(w, r, true)
}

// handleUndrain ends an admin drain of the relay whose boot id or machine
// id is {id} (a failed rollout gives its relay back); a relay that drains
// by itself (shutting down) stays draining.
func (s *Server) handleUndrain(w http.ResponseWriter, r *http.Request) error {
	return s.setDrain(w, r, false)
}

func (s *Server) setDrain(w http.ResponseWriter, r *http.Request, on bool) error {
	id := r.PathValue("id")
	if id == "" || len(id) > maxIDLen {
		return wire.ErrBadRequest.WithMessage("instance id is missing or too long")
	}
	sn, err := s.st.setDrain(id, on)
	if err != nil {
		return err
	}
	s.events.poke()
	wire.WriteJSON(w, http.StatusOK, s.st.instanceOf(sn, s.clock.Now()))
	return nil
}
