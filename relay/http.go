package relay

import (
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/purrfly/purrfly/relay/internal/wstransport"
	"github.com/purrfly/purrfly/wire"
)

// errReplayed is the body of a Fly-Replay answer. The status is 421
// Misdirected Request: Fly's proxy acts on the header whatever the status,
// and a client that reaches the relay without Fly in front learns plainly
// that this machine does not serve the session.
var errReplayed = &wire.Error{Code: "fly_replay", Message: "this session is served by another machine",
	Retryable: true, Status: http.StatusMisdirectedRequest}

// errNoOwner answers when the Router neither serves nor names a machine.
var errNoOwner = &wire.Error{Code: "no_owner", Message: "no machine can serve this session right now",
	Retryable: true, Status: http.StatusServiceUnavailable}

// internal guards a route the balancer or another machine of the app
// calls: one of methods (nil: any), then the internal secret (wire.Call's
// other side) under its source's failed-auth throttle (secretGuard). The
// handler starts at its own work.
func (s *Server) internal(methods []string, h wire.Handler) wire.Handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if methods != nil && !slices.Contains(methods, r.Method) {
			return wire.ErrMethodNotAllowed
		}
		if err := s.secretGuard(w, r, wire.CheckInternal); err != nil {
			return err
		}
		return h(w, r)
	}
}

// mainHandler is the HTTP port: /ping, internal allocation, /metrics, the
// WebSocket upgrade at /, and JSON 404s for everything else.
func (s *Server) mainHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ping", wire.Handler(s.handlePing))
	mux.Handle(wire.PathReady, wire.Handler(s.handleReady))
	get, post := []string{http.MethodGet, http.MethodHead}, []string{http.MethodPost}
	mux.Handle(wire.PathRelayAllocate, s.internal(post, s.handleAllocate))
	mux.Handle(wire.PathForward, s.internal(nil, s.handleForward)) // a WebSocket upgrade: checks it is one
	mux.Handle(wire.PathHandover, s.internal(post, s.handleHandover))
	mux.Handle(wire.PathRelayRooms, s.internal(get, s.handleRooms))
	mux.Handle(wire.PathRelayRoomClose, s.internal(post, s.handleRoomClose))
	mux.Handle(wire.PathRelayRetire, s.internal([]string{http.MethodGet, http.MethodPost}, s.handleRetire))
	for _, op := range []wire.MigrationOp{wire.OpCurrent, wire.OpAuthorize, wire.OpClaim, wire.OpActivate} {
		mux.Handle(op.RelayPath(), s.migrationHandler(op))
	}
	// Open on the private network (Fly's scraper, flysim, local runs); the
	// operator's secret through Fly's public proxy, throttled per source
	// with the internal routes' (one budget of guesses).
	metrics := wire.PrivateOr(func(w http.ResponseWriter, r *http.Request) error {
		return s.secretGuard(w, r, wire.CheckOperator)
	}, promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	mux.Handle("/metrics", wire.Handler(func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return wire.ErrMethodNotAllowed
		}
		metrics.ServeHTTP(w, r)
		return nil
	}))
	mux.Handle("/", wire.Handler(func(w http.ResponseWriter, r *http.Request) error {
		if r.URL.Path == "/" && wstransport.IsUpgrade(r) {
			return s.serveWS(w, r)
		}
		return wire.ErrNotFound
	}))
	return wire.Common(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire.SetInternalVersion(w.Header())
		mux.ServeHTTP(w, r)
	}))
}

func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return wire.ErrMethodNotAllowed
	}
	wire.WriteJSON(w, http.StatusOK, wire.Ping{
		Role:             "relay",
		BootID:           s.opts.BootID,
		Version:          s.opts.Version,
		Region:           s.opts.Region,
		MachineID:        s.opts.MachineID,
		ImageRef:         s.opts.ImageRef,
		InternalProtocol: wire.InternalProtocolVersion,
		Draining:         s.core.Draining(),
		Retiring:         s.core.Retiring(),
		RetireBy:         s.retire.deadline(),
	})
	return nil
}

// handleAllocate is the balancer's PathRelayAllocate: create the room (or
// replay the allocation that created it) and answer the host capability and
// the room's publication.
func (s *Server) handleAllocate(w http.ResponseWriter, r *http.Request) error {
	name, err := wire.HeaderValue(r, wire.HeaderName, wire.MaxSessionIDLen)
	if err != nil {
		return err
	}
	if _, err := wire.OptionalHeader(r, wire.HeaderRegion, wire.MaxRegionLen); err != nil {
		return err
	}
	allocID, err := wire.OptionalHeader(r, wire.HeaderAllocationID, wire.MaxAllocationIDLen)
	if err != nil {
		return err
	}
	// The balancer names the boot it chose; when that is this one it
	// reached this machine directly (its own endpoint), so the room is
	// created here whatever the Router would say. A machine of a
	// multi-machine app is only ever called on its own address, so another
	// boot there means the chosen process is gone (the machine restarted
	// and kept its address): refuse with stale_boot, which the balancer
	// takes as "place it elsewhere", rather than a Fly-Replay it cannot
	// follow.
	target := r.Header.Get(wire.HeaderTargetBoot)
	if s.opts.MultiMachine && target != "" && target != s.opts.BootID {
		s.m.allocations.WithLabelValues(errCode(wire.ErrStaleBoot)).Inc()
		return wire.ErrStaleBoot.WithMessage("this machine does not run the boot the balancer chose")
	}
	if target != s.opts.BootID && s.replayed(w, r, wire.SessionID(name), s.opts.Router) {
		return nil
	}
	a, err := s.core.Allocate(name, allocID)
	if err != nil {
		s.m.allocations.WithLabelValues(errCode(err)).Inc()
		return err
	}
	result := "created"
	if a.Replayed {
		result = "replayed"
	} else {
		s.log.Info("room allocated", "room", name, "epoch", a.Pub.Epoch)
	}
	s.m.allocations.WithLabelValues(result).Inc()
	wire.WriteJSON(w, http.StatusOK, wire.RelayAllocation{
		Capability:  s.capability(a.HostSecret),
		Publication: a.Pub,
		BootID:      s.opts.BootID,
		Replayed:    a.Replayed,
	})
	return nil
}

// capability is this relay's connection fields with secret.
func (s *Server) capability(secret string) wire.Capability {
	return wire.Capability{
		Host:      s.opts.PublicHost,
		Secret:    secret,
		Port:      s.advertisedWSPort,
		UDPPort:   s.advertisedUDPPort,
		UDPPortV2: s.advertisedUDPPortV2,
		SSL:       s.opts.SSL,
	}
}

func errCode(err error) string {
	if e, ok := err.(*wire.Error); ok {
		return e.Code
	}
	return "internal"
}

// replayed asks router where sid is served. When it is not here, it
// answers "Fly-Replay: instance=<id>" (no upgrade, no allocation) and
// reports true.
func (s *Server) replayed(w http.ResponseWriter, r *http.Request, sid wire.SessionID, router Router) bool {
	if router == nil {
		return false
	}
	rr := router(sid, r)
	if rr.Serve {
		return false
	}
	if rr.Instance == "" {
		wire.WriteError(w, errNoOwner)
		return true
	}
	w.Header().Set(wire.HeaderFlyReplay, "instance="+rr.Instance)
	wire.WriteError(w, errReplayed)
	return true
}
