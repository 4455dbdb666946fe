package balancer

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/purrfly/purrfly/dashboard"
	"github.com/purrfly/purrfly/wire"
)

// Standby (package doc: Standby). A balancer machine is the primary, or a
// standby for one (Options.StandbyFor, set by launch and rollout in the
// standby's env). Its role (Server.role) is one of:
//
//   - serving: it answers every route;
//   - claiming: a primary at boot, asking every running standby to yield
//     (PathBalancerYield), at most Options.ClaimWait; a standby at boot,
//     looking whether its primary answers;
//   - yielded: a standby that found its primary, or was asked to yield.
//     It never serves again: Server.Yielded is closed and the command
//     exits 0, so its machine is stopped again.
//
// While not serving, every route but the health routes, /metrics, the
// dashboard's files and the yield route answers 503 balancer_standby; a
// yielded standby adds Fly-Replay to its primary, so Fly's proxy sends the
// request there. A held boot watch is answered at once on yield (draining),
// so relays poll again through the app's URL, reach the server, and
// register at once. For Options.SettleWindow after it starts serving, a
// balancer answers allocations 503 balancer_settling: the relays are
// republishing their rooms, and a name placed before its room is known
// could land on a second relay. A join, location or migration call for a
// room it does not know yet answers the same (unsettled), not a final
// room_not_found.
const (
	roleServing int32 = iota
	roleClaiming
	roleYielded
)

// Peers finds the balancer app's other machines (cmd/purrctl wires Fly's
// internal DNS: vms.<app>.internal and <id>.vm.<app>.internal).
type Peers struct {
	// Running lists the ids of the app's other started machines.
	Running func(ctx context.Context) ([]string, error)
	// URL is the base URL of machine id on the private network.
	URL func(ctx context.Context, id string) (string, error)
}

func (p Peers) configured() bool { return p.Running != nil && p.URL != nil }

// Defaults of the standby's waits.
const (
	DefaultClaimWait   = 5 * time.Second
	DefaultPeerCheck   = time.Second
	DefaultPeerTimeout = time.Second
)

// Yielded is closed once this standby has yielded: stop the process (exit
// 0), its machine is then stopped as a standby should be.
func (s *Server) Yielded() <-chan struct{} { return s.yieldCh }

// Serving reports whether this machine serves now.
func (s *Server) Serving() bool { return s.role.Load() == roleServing }

// startRole decides the role at Start and runs the peer loop (ctx ends it).
func (s *Server) startRole(ctx context.Context) {
	switch {
	case !s.opts.Peers.configured():
		s.serve()
	case s.opts.StandbyFor != "":
		s.role.Store(roleClaiming)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.standbyLoop(ctx) }()
	default:
		s.role.Store(roleClaiming)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.primaryLoop(ctx) }()
	}
}

// serve starts serving (and the settle window).
func (s *Server) serve() {
	s.settleUntil.Store(s.clock.Now().Add(s.opts.SettleWindow).UnixNano())
	if s.role.CompareAndSwap(roleClaiming, roleServing) || s.role.Load() == roleServing {
		s.log.Info("balancer serving", "boot", s.opts.BootID, "standby_for", s.opts.StandbyFor)
	}
}

// yield stops this standby for good.
func (s *Server) yield(why string) {
	s.yieldOnce.Do(func() {
		s.role.Store(roleYielded)
		s.draining.Store(true)
		close(s.yieldCh)
		s.log.Info("standby balancer yields to its primary", "primary", s.opts.StandbyFor, "why", why)
	})
}

// standbyLoop: serve unless the primary answers; while serving, look
// every PeerCheck and yield once it does.
func (s *Server) standbyLoop(ctx context.Context) {
	for first := true; ; first = false {
		if s.primaryAnswers(ctx) {
			s.yield("the primary answers")
			return
		}
		if first {
			s.serve()
		}
		if s.sleep(ctx, s.opts.PeerCheck) != nil {
			return
		}
	}
}

// primaryAnswers reports whether the primary answers /ping within
// PeerTimeout.
func (s *Server) primaryAnswers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, s.opts.PeerTimeout)
	defer cancel()
	u, err := s.opts.Peers.URL(ctx, s.opts.StandbyFor)
	if err != nil {
		return false
	}
	_, err = wire.Call{Method: http.MethodGet, URL: strings.TrimSuffix(u, "/") + "/ping", OK: http.StatusOK}.Do(ctx, s.client)
	return err == nil
}

// primaryLoop: ask every running standby to yield (at most ClaimWait),
// then serve; afterwards ask again every PeerCheck, for a standby that
// started unseen.
func (s *Server) primaryLoop(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, s.opts.ClaimWait)
	s.askToYield(cctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	s.serve()
	for s.sleep(ctx, s.opts.PeerCheck) == nil {
		s.askToYield(ctx)
	}
}

// askToYield asks every other running machine to yield, each until it has
// yielded, cannot be reached or ctx ends.
func (s *Server) askToYield(ctx context.Context) {
	ids, err := s.opts.Peers.Running(ctx)
	if err != nil {
		return
	}
	for _, id := range ids {
		for ctx.Err() == nil {
			err := s.askOne(ctx, id)
			if err == nil || errors.Is(err, wire.ErrNotDelivered) {
				break // yielded, or nothing there to yield
			}
			if s.sleep(ctx, 100*time.Millisecond) != nil {
				return
			}
		}
	}
}

func (s *Server) askOne(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.PeerTimeout)
	defer cancel()
	u, err := s.opts.Peers.URL(ctx, id)
	if err != nil {
		return wire.ErrNotDelivered
	}
	var ans wire.BalancerYield
	err = wire.Call{Method: http.MethodPost, URL: strings.TrimSuffix(u, "/") + wire.PathBalancerYield, Secret: s.opts.Secret, OK: http.StatusOK}.DoJSON(ctx, s.client, &ans)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, wire.ErrOutcomeUnknown) {
		return wire.ErrNotDelivered // a host that answers nothing: nothing serves there
	}
	if err == nil && !ans.Yielded {
		s.log.Warn("another balancer machine runs as a primary too: only one machine may lack BALANCER_STANDBY_FOR", "machine", id)
	}
	return err
}

func (s *Server) sleep(ctx context.Context, d time.Duration) error {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handleYield is PathBalancerYield: a standby yields and says so once it no
// longer serves; a primary refuses (Yielded false).
func (s *Server) handleYield(w http.ResponseWriter, r *http.Request) error {
	if s.opts.StandbyFor == "" {
		wire.WriteJSON(w, http.StatusOK, wire.BalancerYield{BalancerBoot: s.opts.BootID})
		return nil
	}
	s.yield("asked by its primary")
	wire.WriteJSON(w, http.StatusOK, wire.BalancerYield{BalancerBoot: s.opts.BootID, Yielded: true})
	return nil
}

// settling reports whether allocations wait for the relays' rooms.
func (s *Server) settling() bool { return s.clock.Now().UnixNano() < s.settleUntil.Load() }

// unsettled is err, except that this balancer's own room_not_found (the
// wire.ErrRoomNotFound value its room table answers; a relay's answer,
// decoded, is another value) becomes balancer_settling while it settles:
// the room's relay may not have republished it yet. PurrNet's host
// migration takes room_not_found as final, balancer_settling as a retry.
func (s *Server) unsettled(err error) error {
	if err == wire.ErrRoomNotFound && s.settling() {
		return wire.ErrBalancerSettling
	}
	return err
}

// gate answers the routes of a machine that does not serve now.
func (s *Server) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role := s.role.Load()
		if role == roleServing || ungated(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if role == roleYielded && r.Header.Get(wire.HeaderFlyReplaySrc) == "" {
			w.Header().Set(wire.HeaderFlyReplay, "instance="+s.opts.StandbyFor)
		}
		wire.WriteError(w, wire.ErrBalancerStandby)
	})
}

func ungated(path string) bool {
	switch path {
	case "/ping", "/metrics", wire.PathHealthz, wire.PathReadyz, wire.PathBalancerYield:
		return true
	}
	return strings.HasPrefix(path, dashboard.Path) || path == strings.TrimSuffix(dashboard.Path, "/")
}
