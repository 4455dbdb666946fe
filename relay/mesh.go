package relay

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/wstransport"
	"github.com/purrfly/purrfly/wire"
)

// maxLocateWait bounds one room-location request: a hinted upgrade waits
// for it before falling back to the Router.
const maxLocateWait = 2 * time.Second

// mesh is what a machine of a multi-machine relay app needs beyond a
// single relay: where rooms live (locator), the route decision before an
// upgrade (route), and the links of forwarded connections (forward.go).
// nil when Options.MultiMachine is off.
//
// It holds what it uses of the relay, not the Server: the routing core,
// the registrar (handovers publish through it), a few options, the
// sessions the Server waits for, and the WebSocket transport that runs
// its links.
type mesh struct {
	core     *core.Core             // static: the relay's routing core (rooms, links, adoption)
	reg      *registrar             // static: nil when standalone (then no handovers)
	clock    clock.Clock            // static: the relay's clock
	log      *slog.Logger           // static
	sessions *sync.WaitGroup        // static: the Server's; a link is a session until its reader and writer end
	ws       *wstransport.Transport // static: runs the links (their writer, their reader)

	// Static: from Options, complete at New.
	bootID, machineID, secret      string
	router                         Router // nil: serve what the balancer does not know
	forwardTimeout, requestTimeout time.Duration

	// Set by start, which Server.Start calls before it binds the UDP
	// socket or serves anything; static afterwards.
	self advertised // how clients and the other machines reach this one

	loc  *locator     // static pointer; the cache has its own lock
	dial *http.Client // static: opens links to holder machines (PathForward)
	m    *meshMetrics // static

	given givenRooms // rooms this machine handed over recently (handover_give.go)
}

// meshMetrics are the purrfly_relay_mesh_* series.
type meshMetrics struct {
	lookups       *prometheus.CounterVec // {result}: cached, found, not_found, error
	lookupSeconds prometheus.Histogram
	routes        *prometheus.CounterVec // {decision}: local, replay, serve, fallback
	forwards      *prometheus.CounterVec // {result}: ok, not_found, self, unreachable
	handovers     *prometheus.CounterVec // {result}: ok, refused, error, raced, superseded (asked); given, given_again, declined (answered)
	dialSeconds   prometheus.Histogram
	accepted      prometheus.Counter // links accepted from other machines
	active        prometheus.Gauge   // forwarded connections open on this machine (as the edge)
}

func newMeshMetrics(reg prometheus.Registerer) (*meshMetrics, error) {
	m := &meshMetrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_relay_mesh_lookups_total",
			Help: "Room location lookups, by result (cached, found, not_found, error).",
		}, []string{"result"}),
		lookupSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "purrfly_relay_mesh_lookup_duration_seconds",
			Help:    "Duration of room location requests to the balancer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		routes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_relay_mesh_routes_total",
			Help: "Decisions for hinted upgrades, by decision (local, replay, serve, fallback).",
		}, []string{"decision"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_relay_mesh_forwards_total",
			Help: "Connections for rooms held elsewhere, by outcome (ok, not_found, self, unreachable).",
		}, []string{"result"}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_relay_mesh_handovers_total",
			Help: "Room handovers to the machine its host reached, by result: asked (ok, refused, error, raced, superseded) and answered (given, given_again, declined).",
		}, []string{"result"}),
		dialSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "purrfly_relay_mesh_link_dial_duration_seconds",
			Help:    "Time to open a link to the holder machine (upgrade included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purrfly_relay_mesh_links_accepted_total",
			Help: "Forwarded connections accepted from other machines (this machine holds the room).",
		}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "purrfly_relay_mesh_forwarded_connections",
			Help: "Connections this machine forwards to another machine right now.",
		}),
	}
	for _, c := range []prometheus.Collector{m.lookups, m.lookupSeconds, m.routes, m.forwards, m.handovers, m.dialSeconds, m.accepted, m.active} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("failed to register relay mesh metrics: %w", err)
		}
	}
	return m, nil
}

func newMesh(s *Server) (*mesh, error) {
	o := s.opts
	m, err := newMeshMetrics(o.Metrics)
	if err != nil {
		return nil, err
	}
	lookupClient := &http.Client{
		Timeout:   o.RequestTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 8, MaxConnsPerHost: maxLocateInflight, IdleConnTimeout: 90 * time.Second},
	}
	return &mesh{
		given:          givenRooms{mu: lockrank.Mutex{Class: lockrank.Given}},
		core:           s.core,
		reg:            s.reg,
		clock:          s.clock,
		log:            s.log,
		sessions:       &s.sessions,
		ws:             s.ws,
		bootID:         o.BootID,
		machineID:      o.MachineID,
		secret:         o.Secret,
		router:         o.Router,
		forwardTimeout: o.ForwardTimeout,
		requestTimeout: o.RequestTimeout,
		m:              m,
		loc: &locator{
			mu:      lockrank.Mutex{Class: lockrank.Locator},
			base:    strings.TrimRight(o.BalancerURL, "/"),
			secret:  o.Secret,
			client:  lookupClient,
			clock:   s.clock,
			ttl:     o.LocateTTL,
			timeout: min(o.RequestTimeout, o.ForwardTimeout, maxLocateWait),
			m:       m,
			cache:   make(map[string]locEntry),
			slots:   make(chan struct{}, maxLocateInflight),
		},
		dial: wstransport.LinkClient(o.ForwardTimeout),
	}, nil
}

// start binds the mesh to the started relay: its life and its advertised
// addresses. Server.Start calls it once, before anything can reach the
// mesh (the UDP socket is bound and the listeners served after it).
func (m *mesh) start(self advertised) { m.self = self }

// close releases idle lookup connections (after every session ended).
func (m *mesh) close() {
	m.loc.client.CloseIdleConnections()
	m.dial.CloseIdleConnections()
}

// local reports whether this relay holds a live room of that name.
func (m *mesh) local(name string) bool { return m.core.Local(name) }

// sameApp reports whether a holder is a machine of this relay's own app:
// clients reach it at the same public host and port, so Fly's proxy can
// replay a request there.
func (m *mesh) sameApp(loc wire.RoomLocation) bool {
	return loc.MachineID != "" && strings.EqualFold(loc.Host, m.self.publicHost) && loc.Port == m.self.wsPort
}

// route is the Router of a multi-machine relay for WebSocket upgrades
// (the sticky router): it keeps every room on the machine that holds it,
// whatever hashing would say today.
//
//   - no hint (PurrNet's own client): serve; the room is known only from
//     the authentication message, and forward.go forwards it if needed;
//   - the room is here: serve;
//   - the request was replayed already (Fly-Replay-Src): serve, and forward
//     after the authentication message if the room is elsewhere (one
//     Fly-Replay hop only, never a loop);
//   - the balancer names the holder, a machine of this app: Fly-Replay to
//     it; a holder elsewhere (another app, or no machine id): serve and
//     forward;
//   - the balancer does not know the room, or cannot be asked: the
//     configured Router decides (rendezvous hashing on Fly), else serve.
func (m *mesh) route(ctx context.Context, sid wire.SessionID, r *http.Request) wire.RouteResult {
	if sid == "" || m.local(string(sid)) {
		m.m.routes.WithLabelValues("local").Inc()
		return wire.RouteResult{Serve: true}
	}
	if r != nil && r.Header.Get(wire.HeaderFlyReplaySrc) != "" {
		m.m.routes.WithLabelValues("serve").Inc()
		return wire.RouteResult{Serve: true}
	}
	loc, found, err := m.loc.locate(ctx, string(sid))
	switch {
	case err != nil || !found:
		m.m.routes.WithLabelValues("fallback").Inc()
		if m.router != nil {
			return m.router(sid, r)
		}
		return wire.RouteResult{Serve: true}
	case loc.BootID != m.bootID && loc.MachineID != m.machineID && m.sameApp(loc):
		m.m.routes.WithLabelValues("replay").Inc()
		return wire.RouteResult{Instance: loc.MachineID}
	}
	m.m.routes.WithLabelValues("serve").Inc()
	return wire.RouteResult{Serve: true}
}

// mayForward reports whether a first message names a room this machine
// does not hold (so routing it may need the network).
func (m *mesh) mayForward(first []byte) bool {
	a, err := wire.ParseAuth(first)
	return err == nil && !a.Pipe && !m.local(a.RoomName)
}
