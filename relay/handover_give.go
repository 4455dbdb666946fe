package relay

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/wire"
)

// The holder's side of a handover (handover.go has the design).

// givenRetention is how long a holder answers a repeated request of the
// same asker with the credentials it already gave (the first answer was
// lost in transport); maxGiven bounds what it remembers.
const (
	givenRetention = 30 * time.Second
	maxGiven       = 4096
)

// givenRooms remembers the rooms this machine handed over recently, by
// name. All fields guarded by mu.
type givenRooms struct {
	mu lockrank.Mutex
	m  map[string]givenRoom
}

type givenRoom struct {
	asker string // boot id of the machine it was given to
	h     wire.HandoverResponse
	until time.Time
}

// remember records that room h.Name was given to asker.
func (g *givenRooms) remember(asker string, h wire.HandoverResponse, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = make(map[string]givenRoom)
	}
	if len(g.m) >= maxGiven {
		g.sweepLocked(now)
		if len(g.m) >= maxGiven {
			clear(g.m)
		}
	}
	g.m[h.Name] = givenRoom{asker: asker, h: h, until: now.Add(givenRetention)}
}

// sweep forgets the expired entries (they hold the rooms' secrets): the
// relay's cleanup tick calls it, so they outlive givenRetention by at most
// one tick.
func (g *givenRooms) sweep(now time.Time) {
	g.mu.Lock()
	g.sweepLocked(now)
	g.mu.Unlock()
}

// sweepLocked is sweep with g.mu held.
func (g *givenRooms) sweepLocked(now time.Time) {
	for k, v := range g.m {
		if !now.Before(v.until) {
			delete(g.m, k)
		}
	}
}

// again returns what room name was given to asker, when that was less
// than givenRetention ago and secret is the room's host secret. here says
// whether a live room of that name is on this machine again (it came
// back, or was allocated anew): then the memory is stale and forgotten.
func (g *givenRooms) again(name, asker, secret string, here bool, now time.Time) (wire.HandoverResponse, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.m[name]
	if !ok {
		return wire.HandoverResponse{}, false
	}
	if here || !now.Before(e.until) {
		delete(g.m, name)
		return wire.HandoverResponse{}, false
	}
	if e.asker != asker || !wire.SecretEqual(secret, e.h.HostSecret) {
		return wire.HandoverResponse{}, false
	}
	return e.h, true
}

// handleHandover is wire.PathHandover: another machine of the app asks for
// a room held here, because its host reached that machine.
func (s *Server) handleHandover(w http.ResponseWriter, r *http.Request) error {
	if s.mesh == nil {
		return wire.ErrNotFound
	}
	var req wire.HandoverRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, wire.MaxAuthSize)).Decode(&req); err != nil ||
		req.Name == "" || len(req.Name) > wire.MaxSessionIDLen || req.BootID == "" || len(req.BootID) > wire.MaxSessionIDLen {
		return wire.ErrBadRequest.WithMessage("a handover request needs a room name, a secret and the asker's boot id")
	}
	now := s.clock.Now()
	if h, ok := s.mesh.given.again(req.Name, req.BootID, req.Secret, s.mesh.local(req.Name), now); ok {
		s.mesh.m.handovers.WithLabelValues("given_again").Inc()
		wire.WriteJSON(w, http.StatusOK, h)
		return nil
	}
	// An asker that has given up would never adopt the room.
	if r.Context().Err() != nil {
		return wire.ErrHandoverRefused
	}
	h, ok := s.core.HandOver(req.Name, req.Secret)
	if !ok {
		s.mesh.m.handovers.WithLabelValues("declined").Inc()
		return wire.ErrHandoverRefused
	}
	h.From.BootID = s.opts.BootID
	s.mesh.given.remember(req.BootID, h, now)
	s.mesh.m.handovers.WithLabelValues("given").Inc()
	s.log.Info("room handed over to another machine", "room", req.Name, "to_boot", req.BootID, "epoch", h.From.Epoch)
	wire.WriteJSON(w, http.StatusOK, h)
	return nil
}
