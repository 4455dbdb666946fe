package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// Retiring (wire.PathRelayRetire). A deploy replaces a relay machine by
// overlap: it proves a new machine first, then retires the old one here.
// A retiring relay:
//
//   - creates no room (allocation: wire.ErrRetiring; a vacant room of the
//     name is let go, as when draining) and asks for no handover;
//   - keeps serving its rooms: their players, reconnects and host
//     migrations, over WebSocket, UDP and the mesh;
//   - sends a public WebSocket upgrade that is not for one of its rooms
//     elsewhere ("Fly-Replay: elsewhere=true;fallback=prefer_self"), so
//     that new games' players do not keep it alive as their edge (the
//     machine they land on instead forwards a player of one of its rooms
//     back to it, or takes a room whose host has not arrived over). UDP
//     cannot be sent elsewhere: Fly sends an app's UDP to one machine, so
//     a retiring machine that serves it forwards the app's UDP players
//     until they have left;
//   - says Retiring and RetireBy in every heartbeat and at /ping, so that
//     no balancer, restarted or not, places a room on it;
//   - releases an empty room once its players' recovery window (one
//     activation lease, as for a takeover) has passed, rather than after
//     the empty-room timeout: no new allocation reuses a name here;
//   - once it holds no connection and no room, refuses new sessions and
//     says so on Retired(): the process exits cleanly (exit 0, which
//     Fly's on-failure restart policy leaves stopped);
//   - at RetireBy closes what is left with 1012, as a drain does at its
//     deadline, logs and counts it, and says so on Retired() too.
//
// Retiring is for the rest of the process's life; a second retire call
// may only bring RetireBy forward. It is not kept across a restart of the
// process: the deploy tool marks the machine in its Fly metadata and
// retires a restarted process again.
type retirement struct {
	done chan struct{} // closed once, when the process should exit

	mu      lockrank.Mutex
	by      time.Time // guarded by mu: the latest stop; zero while not retiring
	loop    bool      // guarded by mu: retireLoop started
	closed  bool      // guarded by mu: done is closed
	overdue bool      // guarded by mu: RetireBy ended it (closed what was left)
	left    Stats     // guarded by mu: what RetireBy closed
}

// retireTick is how often a retiring relay looks at what it still holds.
const retireTick = time.Second

// deadline is the retiring relay's latest stop (zero when not retiring).
func (r *retirement) deadline() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by
}

// Retired is closed when a retiring relay is done: it holds nothing any
// more, or RetireBy passed and it closed what was left (RetireStats).
// The caller then shuts it down (Shutdown), which has nothing left to
// drain.
func (s *Server) Retired() <-chan struct{} { return s.retire.done }

// RetireStats reports whether RetireBy ended the retirement and what it
// closed then.
func (s *Server) RetireStats() (deadline bool, closed Stats) {
	s.retire.mu.Lock()
	defer s.retire.mu.Unlock()
	return s.retire.overdue, s.retire.left
}

// Retire makes the relay retire, to stop by by at the latest (bounded by
// wire.MaxRetireAfter from now; a zero or past by is now). A second call
// keeps the sooner of the two. It fails with wire.ErrDraining when the
// relay is shutting down.
func (s *Server) Retire(by time.Time) (wire.RetireStatus, error) {
	now := s.clock.Now()
	if by.Before(now) {
		by = now
	}
	if limit := now.Add(wire.MaxRetireAfter); by.After(limit) {
		by = limit
	}
	s.mu.Lock()
	if !s.started || s.ended {
		s.mu.Unlock()
		return wire.RetireStatus{}, wire.ErrDraining.WithMessage("the relay is shutting down")
	}
	r := &s.retire
	r.mu.Lock()
	first := r.by.IsZero()
	if first || by.Before(r.by) {
		r.by = by
	}
	start := !r.loop
	r.loop = true
	by = r.by
	r.mu.Unlock()
	s.core.SetRetiring()
	if start {
		ctx := s.ctx
		s.bg.Go(func() { s.retireLoop(ctx) })
	}
	s.mu.Unlock()
	if first {
		st := s.Stats()
		s.log.Info("relay retiring: no new rooms; it stops once its games have ended",
			"retireBy", by.UTC(), "rooms", st.Rooms, "connections", st.Connections)
	}
	if s.reg != nil {
		s.reg.beatNow()
	}
	return s.retireStatus(), nil
}

func (s *Server) retireStatus() wire.RetireStatus {
	st := s.Stats()
	return wire.RetireStatus{BootID: s.opts.BootID, Retiring: s.core.Retiring(), RetireBy: s.retire.deadline(),
		Rooms: st.Rooms, Connections: st.Connections}
}

// handleRetire is wire.PathRelayRetire: POST retires (the body names this
// boot), GET reads.
func (s *Server) handleRetire(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodGet {
		wire.WriteJSON(w, http.StatusOK, s.retireStatus())
		return nil
	}
	var req wire.RetireRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, wire.MaxAuthSize)).Decode(&req); err != nil || req.BootID == "" {
		return wire.ErrBadRequest.WithMessage("a retire request needs the boot id to retire and retireBy")
	}
	if req.BootID != s.opts.BootID {
		return wire.ErrStaleBoot.WithMessage("this machine does not run the boot to retire")
	}
	st, err := s.Retire(req.RetireBy)
	if err != nil {
		return err
	}
	wire.WriteJSON(w, http.StatusOK, st)
	return nil
}

// retireLoop runs while the relay retires: every retireTick it releases
// the rooms whose recovery window is over, then ends the retirement when
// nothing is left (refusing new sessions first) or RetireBy has passed.
func (s *Server) retireLoop(ctx context.Context) {
	t := s.clock.NewTicker(retireTick)
	defer t.Stop()
	for {
		if s.retireStep() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// retireStep is one look of retireLoop; it reports whether the
// retirement is over.
func (s *Server) retireStep() bool {
	now := s.clock.Now()
	s.core.ReleaseRecovered(now)
	if s.leaveIfIdle() {
		s.endRetirement(false, Stats{})
		return true
	}
	if now.Before(s.retire.deadline()) {
		return false
	}
	left := s.Stats()
	s.log.Warn("retire deadline passed: closing what is left with 1012",
		"rooms", left.Rooms, "connections", left.Connections)
	s.retireM.closed.Add(float64(left.Connections))
	s.core.CloseAll(core.ReasonShutdown)
	s.endRetirement(true, left)
	return true
}

// leaveIfIdle refuses new sessions when the relay holds no connection
// and no room, and reports whether it did. A session admitted just
// before is seen and the relay serves on.
func (s *Server) leaveIfIdle() bool {
	if s.core.NumConns() > 0 || s.core.NumRooms() > 0 {
		return false
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.core.NumConns() == 0 && s.core.NumRooms() == 0 {
		return true
	}
	s.mu.Lock()
	s.closed = s.ended
	s.mu.Unlock()
	return false
}

func (s *Server) endRetirement(deadline bool, left Stats) {
	r := &s.retire
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed, r.overdue, r.left = true, deadline, left
	close(r.done)
	if !deadline {
		s.log.Info("relay retired: its last game has ended")
	}
}

// retireReplay answers, on a retiring machine of a multi-machine app, a
// public WebSocket upgrade that is not for one of its rooms (no session
// hint, or another room's) with "Fly-Replay: elsewhere=true;
// fallback=prefer_self": Fly's proxy sends it to another machine of the
// app (back here, marked replayed, when there is none). It reports
// whether it answered.
func (s *Server) retireReplay(w http.ResponseWriter, r *http.Request, sid wire.SessionID) bool {
	if !s.core.Retiring() || s.mesh == nil || r.Header.Get(wire.HeaderFlyReplaySrc) != "" {
		return false
	}
	if sid != "" && s.mesh.local(string(sid)) {
		return false
	}
	s.retireM.replays.Inc()
	w.Header().Set(wire.HeaderFlyReplay, "elsewhere=true;fallback=prefer_self")
	wire.WriteError(w, errReplayed)
	return true
}

// retireMetrics are the retirement's counters.
type retireMetrics struct {
	closed  prometheus.Counter // connections RetireBy closed
	replays prometheus.Counter // public upgrades sent elsewhere while retiring
}

func newRetireMetrics(reg prometheus.Registerer) (retireMetrics, error) {
	m := retireMetrics{
		closed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purrfly_relay_retire_closed_connections_total",
			Help: "Connections a retiring relay closed (1012) because its retire deadline passed with them still open.",
		}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purrfly_relay_retire_replays_total",
			Help: "Public WebSocket upgrades a retiring relay sent to another machine of its app (Fly-Replay elsewhere).",
		}),
	}
	for _, c := range []prometheus.Collector{m.closed, m.replays} {
		if err := reg.Register(c); err != nil {
			return m, fmt.Errorf("failed to register relay metrics: %w", err)
		}
	}
	return m, nil
}
