package balancer

import (
	"net/http"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// The deploy tool's routes (GET /v1/instances, POST
// /v1/instances/{id}/drain and /undrain) take an admin key or the shared
// SECRET (adminRoute.legacySecret); v1_instances.go has the operator's.

// staleAfter is how long without a heartbeat marks a relay stale: two
// thirds of its expiry (two of three missed heartbeats).
func (s *Server) staleAfter(sn relaySnap) time.Duration {
	return max(s.opts.RelayExpiry, sn.expiry) * 2 / 3
}

func (s *Server) instanceOf(sn relaySnap, now time.Time) wire.Instance {
	i := sn.entry.info
	status := wire.InstanceLive
	if sn.draining {
		status = wire.InstanceDraining
	}
	return wire.Instance{
		BootID:        i.BootID,
		MachineID:     i.MachineID,
		Region:        i.Region,
		Endpoint:      i.Endpoint,
		Host:          i.Host,
		Status:        status,
		Stale:         now.Sub(sn.lastHeartbeat) > s.staleAfter(sn),
		Rooms:         sn.entry.rooms.Load(),
		Connections:   sn.entry.conns.Load(),
		LastHeartbeat: sn.lastHeartbeat.UTC().Format(time.RFC3339Nano),
		Image:         i.ImageRef,
		Labels:        i.Labels,
		Capacity:      i.Capacity,
	}
}

// Instances lists the registered relays, ordered by endpoint, as GET
// /v1/instances does (for embedding callers such as a local dev stack).
func (s *Server) Instances() []wire.Instance {
	snaps := s.reg.snapshot()
	now := s.clock.Now()
	out := make([]wire.Instance, 0, len(snaps))
	for _, sn := range snaps {
		out = append(out, s.instanceOf(sn, now))
	}
	return out
}

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
	l := s.Instances()
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
	sn, ok := s.reg.setAdminDrain(id, on)
	if !ok {
		return wire.ErrInstanceNotFound
	}
	what := "relay drained by admin"
	if !on {
		what = "relay undrained by admin"
	}
	s.log.Info(what, "endpoint", sn.entry.info.Endpoint, "boot", sn.entry.info.BootID)
	s.events.poke()
	wire.WriteJSON(w, http.StatusOK, s.instanceOf(sn, s.clock.Now()))
	return nil
}
