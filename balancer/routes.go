package balancer

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/purrfly/purrfly/dashboard"
	"github.com/purrfly/purrfly/wire"
)

// routes builds the whole mux, wrapped in wire.Common (no-store, CORS,
// preflight, body cap). Every route checks its own methods so that 404 and
// 405 come in the purrfly error shape too.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	get := []string{http.MethodGet, http.MethodHead}
	post := []string{http.MethodPost}
	mux.Handle("/ping", methods(get, s.handlePing))
	mux.Handle("/servers", methods(get, s.handleServers))
	mux.Handle("/allocate_ws", methods([]string{http.MethodGet, http.MethodPost}, s.handleAllocate))
	mux.Handle("/join", methods(get, s.handleJoin))
	mux.Handle("/list", methods(get, s.handleList))
	mux.Handle("/getTotalConnections", methods(get, s.handleTotalConnections))
	for _, op := range []wire.MigrationOp{wire.OpCurrent, wire.OpAuthorize, wire.OpClaim, wire.OpActivate} {
		allowed := post
		if op == wire.OpCurrent {
			allowed = get
		}
		mux.Handle(op.PublicPath(), methods(allowed, s.handleMigration(op)))
	}
	mux.Handle("/metrics", wire.PrivateOr(func(w http.ResponseWriter, r *http.Request) error {
		return s.secretGuard(w, r, wire.CheckOperator)
	}, s.metricsHandler()))

	mux.Handle(wire.PathRegister, s.internal(post, s.handleRegister))
	mux.Handle(wire.PathPublish, s.internal(post, s.handlePublish))
	mux.Handle(wire.PathUnregister, s.internal(post, s.handleUnregister))
	mux.Handle(wire.PathRoomLocation, s.internal(get, s.handleRoomLocation))
	mux.Handle(wire.PathBalancerBoot, s.internal(get, s.handleBoot))
	mux.Handle(wire.PathBalancerYield, s.internal(post, s.handleYield))

	// The operator's page: static files only; it signs in against /v1.
	mux.Handle(dashboard.Path, dashboard.Handler())
	mux.Handle(strings.TrimSuffix(dashboard.Path, "/"), dashboard.Handler())

	mux.Handle(wire.PathHealthz, methods(get, s.handleHealthz))
	mux.Handle(wire.PathReadyz, methods(get, s.handleReadyz))
	s.adminRoutes(mux)

	mux.Handle("/", wire.Handler(func(http.ResponseWriter, *http.Request) error { return wire.ErrNotFound }))
	return s.adminPreflight(wire.Common(s.gate(mux)))
}

// adminRoutes adds the /v1 admin API (adminroute.go guards each route).
func (s *Server) adminRoutes(mux *http.ServeMux) {
	get := []string{http.MethodGet, http.MethodHead}
	post := []string{http.MethodPost}
	route := func(pattern string, rt adminRoute, h wire.Handler) {
		rt.name = pattern
		mux.Handle(pattern, s.v1(rt, h))
	}
	route(wire.PathStats, adminRoute{methods: get}, s.handleStats)
	route(wire.PathStatsHistory, adminRoute{methods: get}, s.handleStatsHistory)
	route(wire.PathInstances, adminRoute{methods: get, legacySecret: true}, s.handleInstances)
	route(fmt.Sprintf(wire.PathInstanceFmt, "{id}"), adminRoute{methods: get}, s.handleInstance)
	route(fmt.Sprintf(wire.PathInstanceRoomsFmt, "{id}"), adminRoute{methods: get}, s.handleInstanceRooms)
	route(fmt.Sprintf(wire.PathDrainFmt, "{id}"), adminRoute{methods: post, legacySecret: true, audit: true}, s.handleDrain)
	route(fmt.Sprintf(wire.PathUndrainFmt, "{id}"), adminRoute{methods: post, legacySecret: true, audit: true}, s.handleUndrain)
	route(wire.PathRooms, adminRoute{methods: []string{http.MethodGet, http.MethodHead, http.MethodPost}, audit: true}, s.handleRooms)
	route(fmt.Sprintf(wire.PathRoomFmt, "{name}"), adminRoute{methods: []string{http.MethodGet, http.MethodHead, http.MethodDelete}, audit: true}, s.handleRoom)
	route(wire.PathEvents, adminRoute{methods: []string{http.MethodGet}, queryKey: true, stream: true}, s.handleEvents) // not HEAD: a stream
	// Anything else under /v1 is a 404, after the same guard.
	route("/v1/", adminRoute{methods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete}},
		func(http.ResponseWriter, *http.Request) error { return wire.ErrNotFound })
}

func methods(allowed []string, h wire.Handler) wire.Handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !slices.Contains(allowed, r.Method) {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			return wire.ErrMethodNotAllowed
		}
		return h(w, r)
	}
}

func (s *Server) metricsHandler() http.Handler {
	g, ok := s.opts.Metrics.(prometheus.Gatherer)
	if !ok {
		return wire.Handler(func(http.ResponseWriter, *http.Request) error {
			return wire.ErrNotFound.WithMessage("metrics are registered elsewhere")
		})
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) error {
	wire.WriteJSON(w, http.StatusOK, wire.Ping{
		Role:             "balancer",
		BootID:           s.opts.BootID,
		Version:          s.opts.Version,
		Region:           s.opts.Region,
		MachineID:        s.opts.MachineID,
		ImageRef:         s.opts.ImageRef,
		InternalProtocol: wire.InternalProtocolVersion,
		Draining:         s.draining.Load(),
	})
	return nil
}

// handleServers lists the registered relays. A draining relay is left out
// while a non-draining one serves its region (case-insensitively): current
// and older PurrTransport versions connect the host to the relay they
// pinged here, whatever the allocation answered, so a listed draining relay
// would get hosts it refuses. A region whose relays all drain still lists
// them (they serve their rooms; its clients are placed elsewhere). The
// machines of a multi-machine relay app register one by
// one but share a public endpoint: they are listed once per region (the
// client pings the app, whose proxy picks a machine), with the public
// endpoint as apiEndpoint.
func (s *Server) handleServers(w http.ResponseWriter, r *http.Request) error {
	resp := wire.ServersResponse{Servers: s.st.servers()}
	wire.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// handleJoin answers the room's client credential and its relay's
// authoritative connection details. It reads the route without the lease.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) error {
	if ok, wait := s.joins.Allow(wire.ClientIP(r, s.opts.ClientIPHeader)); !ok {
		return wire.RateLimited(w, wait)
	}
	name, err := wire.HeaderValue(r, wire.HeaderName, wire.MaxSessionIDLen)
	if err != nil {
		return err
	}
	rec, err := s.st.liveRoom(name)
	if err != nil {
		return s.unsettled(err)
	}
	i := rec.relay.info
	wire.WriteJSON(w, http.StatusOK, wire.Capability{
		Host:      i.Host,
		Secret:    rec.clientSecret,
		Port:      i.Port,
		UDPPort:   i.UDPPort,
		UDPPortV2: i.UDPPortV2,
		SSL:       i.SSL,
	})
	return nil
}

// handleList answers one page (counted from 0, wire.ListPageSize rooms) of
// the live rooms ordered by name, and their total.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) error {
	page := 0
	if p := r.URL.Query().Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return wire.ErrBadRequest.WithMessage("page must be a non-negative integer")
		}
		page = n
	}
	rooms, total := s.st.listPage(page)
	wire.WriteJSON(w, http.StatusOK, wire.ListResponse{Results: rooms, Total: total})
	return nil
}

// handleTotalConnections sums the connections of every live room (as the
// original service does).
func (s *Server) handleTotalConnections(w http.ResponseWriter, r *http.Request) error {
	_, _, n := s.st.totals()
	wire.WriteJSON(w, http.StatusOK, wire.TotalConnections{TotalConnections: int(n)})
	return nil
}
