package balancer

import (
	"net/http"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// admin guards a route for the rollout tool with the shared SECRET, given as
// "Authorization: Bearer <SECRET>" or in the internal_key_secret header.
func (s *Server) admin(allowed []string, h wire.Handler) wire.Handler {
	return methods(allowed, func(w http.ResponseWriter, r *http.Request) error {
		if err := wire.CheckOperator(r, s.opts.Secret); err != nil {
			return err
		}
		return h(w, r)
	})
}

func instanceOf(sn relaySnap) wire.Instance {
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
		Rooms:         sn.entry.rooms.Load(),
		Connections:   sn.entry.conns.Load(),
		LastHeartbeat: sn.lastHeartbeat.UTC().Format(time.RFC3339Nano),
	}
}

// Instances lists the registered relays, ordered by endpoint, as GET
// /v1/instances does (for embedding callers such as a local dev stack).
func (s *Server) Instances() []wire.Instance {
	snaps := s.reg.snapshot()
	out := make([]wire.Instance, 0, len(snaps))
	for _, sn := range snaps {
		out = append(out, instanceOf(sn))
	}
	return out
}

func (s *Server) handleInstances(w http.ResponseWriter, r *http.Request) error {
	wire.WriteJSON(w, http.StatusOK, wire.InstancesResponse{Instances: s.Instances()})
	return nil
}

// handleDrain marks the relay whose boot id or machine id is {id} as
// draining: no new room is placed there (its rooms keep working). The mark
// survives the relay's removal and return within the same boot, and ends
// with the boot.
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
		return wire.ErrNotFound.WithMessage("no such instance")
	}
	what := "relay drained by admin"
	if !on {
		what = "relay undrained by admin"
	}
	s.log.Info(what, "endpoint", sn.entry.info.Endpoint, "boot", sn.entry.info.BootID)
	wire.WriteJSON(w, http.StatusOK, instanceOf(sn))
	return nil
}
