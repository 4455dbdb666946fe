package balancer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

// handleCloseRoom is DELETE /v1/rooms/{name}: under the room's lease, the
// relay holding the live route closes that incarnation
// (wire.PathRelayRoomClose: every socket closed, the name released
// there), then the route is tombstoned and dropped here, so the name is
// free at once. Idempotent: a name released before (it still has a
// tombstone) answers 200 closed=false; a name never known here is 404
// room_not_found. A relay that cannot confirm is 502 relay_unavailable
// (retry: the close is idempotent at the relay too).
func (s *Server) handleCloseRoom(w http.ResponseWriter, r *http.Request, name string) error {
	if s.rooms.get(name) == nil {
		return wire.ErrRoomNotFound
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*s.opts.RelayTimeout)
	defer cancel()
	e, err := s.rooms.acquire(ctx, name)
	if err != nil {
		return wire.ErrAllocationBusy
	}
	defer s.rooms.release(e)
	cur := e.live.Load()
	if cur == nil || !s.reg.isCurrent(cur.relay) {
		if len(e.fences) > 0 {
			wire.WriteJSON(w, http.StatusOK, wire.RoomClosed{Name: name})
			return nil
		}
		return wire.ErrRoomNotFound
	}
	out, err := s.callCloseRoom(ctx, cur.relay.info.Endpoint, name, cur.epoch)
	if err != nil {
		s.log.Warn("relay did not confirm a room close", "endpoint", cur.relay.info.Endpoint, "room", name, "err", err)
		if errors.Is(err, wire.ErrNotFound) {
			return wire.ErrRelayFailed.WithMessage("the relay cannot close rooms (upgrade it)")
		}
		return wire.ErrRelayFailed.WithMessage("the relay did not confirm the close; retry")
	}
	// The relay closed that incarnation, or no longer had it (Closed
	// false: it ended meanwhile); either way the route here is gone. A newer
	// incarnation the relay holds publishes under its own epoch.
	e.fence(cur.relay.info.BootID, cur.epoch, s.clock.Now())
	e.setLive(nil)
	s.events.poke()
	wire.WriteJSON(w, http.StatusOK, wire.RoomClosed{Name: name, Closed: out.Closed, Connections: out.Connections})
	return nil
}

// callCloseRoom POSTs wire.PathRelayRoomClose for one incarnation.
func (s *Server) callCloseRoom(ctx context.Context, endpoint, name, epoch string) (wire.RelayRoomClosed, error) {
	var out wire.RelayRoomClosed
	body, err := s.relayCall(ctx, http.MethodPost, relayURL(endpoint, wire.PathRelayRoomClose), false, func(h http.Header) {
		h.Set(wire.HeaderName, name)
		h.Set(wire.HeaderRoomEpoch, epoch)
	})
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, wire.ErrRelayBadAnswer
	}
	return out, nil
}
