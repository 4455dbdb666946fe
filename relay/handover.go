package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// The room follows its host (wire.PathHandover).
//
// PurrNet's own client connects without a session hint, so Fly's proxy
// puts a host on any machine of the app, usually not the one the balancer
// created its room on. Forwarding the host would tie the game to two
// machines: stopping either (a scale-down, a deploy) would end it. So when
// the first message of a connection names a room another machine of the
// app holds, the edge first asks that holder to hand the room over. The
// holder agrees only while nobody is connected to the room and the secret
// is the room's host secret: that is the host arriving (or coming back to
// a vacant room). It ends its incarnation (the removal goes to its
// outbox) and answers the credentials; the edge creates a new incarnation
// with them, publishes it naming the old one (Publication.MovedFrom, a
// compare-and-set at the balancer) and serves the host directly. Every
// other answer (a client's secret, a room in use, an old holder, a
// failure) leaves the room where it is and the connection is forwarded as
// before. Afterwards only clients are ever forwarded, and a room's fate is
// its host's machine's.
//
// The new holder publishes the room before it serves the host, so a
// client the host invites is sent to the new holder. Two narrow windows
// remain, both before the host is in: a client that arrives between the
// old holder's answer and that publication (milliseconds), or through a
// machine that looked the room up in the second before the handover (its
// cache), reaches the old holder and gets [4], as for a room that just
// ended.

// maxHandoverAnswer bounds the holder's answer.
const maxHandoverAnswer = 16 << 10

// claim asks the holder at loc to hand room a.RoomName over to this
// machine, and creates it here when it agrees. It reports whether the
// room is now here. Only machines of this app (same public host and port)
// are asked, a draining machine asks nobody (it takes no new rooms), and
// nobody asks unless the balancer said it applies moved publications
// (wire.RegisterResponse.Handover; an older balancer does not).
func (m *mesh) claim(ctx context.Context, loc wire.RoomLocation, a wire.Auth) bool {
	if !m.sameApp(loc) || m.s.core.draining.Load() || m.s.reg == nil || !m.s.reg.handover.Load() {
		return false
	}
	start := time.Now()
	h, err := m.askHandover(ctx, loc, a)
	switch {
	case errors.Is(err, wire.ErrHandoverRefused):
		m.m.handovers.WithLabelValues("refused").Inc()
		return false
	case err != nil:
		m.m.handovers.WithLabelValues("error").Inc()
		m.s.log.Warn("failed to ask for a room's handover", "room", a.RoomName, "holder", loc.MachineID, "err", err)
		return false
	}
	from := wire.Incarnation{BootID: loc.BootID, Epoch: h.From.Epoch}
	r := m.s.core.adopt(h, from)
	if r == nil {
		// A room of that name appeared here meanwhile; the core decides.
		m.m.handovers.WithLabelValues("raced").Inc()
		return true
	}
	m.m.handovers.WithLabelValues("ok").Inc()
	// The balancer learns of the move before the host is served (and so
	// before anyone the host invites can look the room up). A failure
	// here is repaired by the registrar's own publication of the room.
	if m.s.reg != nil {
		st, err := m.s.reg.publishNow(ctx, r)
		if err != nil || st != wire.PubApplied {
			m.s.log.Warn("failed to publish a handed-over room at once", "room", a.RoomName, "status", st, "err", err)
		}
	}
	m.s.log.Info("room handed over to its host's machine", "room", a.RoomName,
		"from_machine", loc.MachineID, "from_epoch", h.From.Epoch, "took", time.Since(start).Round(time.Microsecond).String())
	return true
}

// askHandover is the PathHandover call to the holder.
func (m *mesh) askHandover(ctx context.Context, loc wire.RoomLocation, a wire.Auth) (wire.HandoverResponse, error) {
	var h wire.HandoverResponse
	body, err := json.Marshal(wire.HandoverRequest{Name: a.RoomName, Secret: a.ClientSecret, BootID: m.s.opts.BootID})
	if err != nil {
		return h, fmt.Errorf("failed to encode the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, loc.Endpoint+wire.PathHandover, bytes.NewReader(body))
	if err != nil {
		return h, fmt.Errorf("failed to build the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	wire.SetInternal(req.Header, m.s.opts.Secret)
	resp, err := m.loc.client.Do(req)
	if err != nil {
		return h, fmt.Errorf("failed to reach the holder: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxHandoverAnswer))
	if err != nil {
		return h, fmt.Errorf("failed to read the holder's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return h, wire.DecodeError(resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &h); err != nil || h.Name != a.RoomName || h.HostSecret == "" || h.ClientSecret == "" || h.From.Epoch == "" {
		return h, errors.New("the holder answered a malformed handover")
	}
	return h, nil
}

// handleHandover is wire.PathHandover: another machine of the app asks for
// a room held here, because its host reached that machine.
func (s *Server) handleHandover(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return wire.ErrMethodNotAllowed
	}
	if err := wire.CheckInternal(r, s.opts.Secret); err != nil {
		return err
	}
	if s.mesh == nil {
		return wire.ErrNotFound
	}
	var req wire.HandoverRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, wire.MaxAuthSize)).Decode(&req); err != nil ||
		req.Name == "" || len(req.Name) > wire.MaxSessionIDLen {
		return wire.ErrBadRequest.WithMessage("a handover request needs a room name and a secret")
	}
	h, ok := s.core.handOver(req.Name, req.Secret)
	if !ok {
		s.mesh.m.handovers.WithLabelValues("declined").Inc()
		return wire.ErrHandoverRefused
	}
	h.From.BootID = s.opts.BootID
	s.mesh.m.handovers.WithLabelValues("given").Inc()
	s.log.Info("room handed over to another machine", "room", req.Name, "to_boot", req.BootID, "epoch", h.From.Epoch)
	wire.WriteJSON(w, http.StatusOK, h)
	return nil
}

// handOver ends room name for a handover when secret is its host secret
// and nobody is connected to it, and returns its credentials (From.BootID
// is the caller's to fill). The incarnation's removal goes to the outbox
// as any other.
func (c *core) handOver(name, secret string) (wire.HandoverResponse, bool) {
	r := c.rooms.get(name)
	if r == nil {
		return wire.HandoverResponse{}, false
	}
	r.mu.Lock()
	if r.removed || r.countLocked() > 0 || !wire.SecretEqual(secret, r.hostSecret) {
		r.mu.Unlock()
		return wire.HandoverResponse{}, false
	}
	h := wire.HandoverResponse{
		Name:         r.name,
		HostSecret:   r.hostSecret,
		ClientSecret: r.clientSecret,
		AllocationID: r.allocationID,
		Vacant:       r.vacantLocked(),
		From:         wire.Incarnation{Epoch: r.epoch},
	}
	rem := r.removeLocked()
	r.mu.Unlock()
	c.dropRoom(r, rem)
	return h, true
}

// adopt creates a handed-over room here: a new incarnation with the old
// one's credentials and allocation id (so a replay of its allocation still
// answers the same host secret), published as moved from the old one. It
// returns nil when a live room of that name is already here.
func (c *core) adopt(h wire.HandoverResponse, from wire.Incarnation) *room {
	mu, m := c.rooms.shard(h.Name)
	mu.Lock()
	defer mu.Unlock()
	if r := m[h.Name]; r != nil {
		r.mu.Lock()
		live := !r.removed
		r.mu.Unlock()
		if live {
			return nil
		}
	} else {
		c.rooms.n.Add(1)
	}
	r := &room{
		name:         h.Name,
		epoch:        randomHex(16),
		revision:     1,
		hostSecret:   h.HostSecret,
		clientSecret: h.ClientSecret,
		allocationID: h.AllocationID,
		movedFrom:    &from,
		clients:      make(map[wire.ConnID]*conn),
		emptySince:   c.clock.Now(),
		hostLeft:     h.Vacant,
	}
	m[h.Name] = r
	r.mu.Lock()
	c.notify.roomChanged(r)
	r.mu.Unlock()
	return r
}
