package relay

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/wire"
)

// Keepalive of a link to a holder machine: a holder that vanishes without
// closing its sockets (a host failure rather than a process exit) is found
// out after about linkKeepIdle + linkKeepCount*linkKeepInterval.
const (
	linkKeepIdle     = 5 * time.Second
	linkKeepInterval = 2 * time.Second
	linkKeepCount    = 3
)

// maxLocateWait bounds one room-location request: a hinted upgrade waits
// for it before falling back to the Router.
const maxLocateWait = 2 * time.Second

// mesh is what a machine of a multi-machine relay app needs beyond a
// single relay: where rooms live (locator), the route decision before an
// upgrade (route), and the links of forwarded connections (forward.go).
// nil when Options.MultiMachine is off. Static after New.
type mesh struct {
	s    *Server
	loc  *locator
	dial *http.Client // opens links to holder machines (PathForward)
	m    *meshMetrics

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
	m, err := newMeshMetrics(s.opts.Metrics)
	if err != nil {
		return nil, err
	}
	dialer := &net.Dialer{
		Timeout: s.opts.ForwardTimeout,
		Control: linkSocketControl,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: linkKeepIdle, Interval: linkKeepInterval, Count: linkKeepCount,
		},
	}
	lookupClient := &http.Client{
		Timeout:   s.opts.RequestTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 8, MaxConnsPerHost: maxLocateInflight, IdleConnTimeout: 90 * time.Second},
	}
	return &mesh{
		s: s,
		m: m,
		loc: &locator{
			base:    strings.TrimRight(s.opts.BalancerURL, "/"),
			secret:  s.opts.Secret,
			client:  lookupClient,
			clock:   s.clock,
			ttl:     s.opts.LocateTTL,
			timeout: min(s.opts.RequestTimeout, s.opts.ForwardTimeout, maxLocateWait),
			ctx:     context.Background(), // replaced by Start
			m:       m,
			cache:   make(map[string]locEntry),
			slots:   make(chan struct{}, maxLocateInflight),
		},
		// Links are hijacked by the WebSocket library: the transport never
		// pools them, so it needs no idle limits. Their sockets are
		// masked frameConns, where the link's writer writes its frames in batches
		// (linkconn.go).
		dial: &http.Client{Transport: &http.Transport{DialContext: linkDialContext(dialer), ForceAttemptHTTP2: false}},
	}, nil
}

// close releases idle lookup connections (after every session ended).
func (m *mesh) close() {
	m.loc.client.CloseIdleConnections()
	m.dial.CloseIdleConnections()
}

// local reports whether this relay holds a live room of that name.
func (m *mesh) local(name string) bool {
	r := m.s.core.rooms.get(name)
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.liveLocked()
}

// sameApp reports whether a holder is a machine of this relay's own app:
// clients reach it at the same public host and port, so Fly's proxy can
// replay a request there.
func (m *mesh) sameApp(loc wire.RoomLocation) bool {
	return loc.MachineID != "" && strings.EqualFold(loc.Host, m.s.opts.PublicHost) && loc.Port == m.s.advertisedWSPort
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
func (m *mesh) route(sid wire.SessionID, r *http.Request) RouteResult {
	if sid == "" || m.local(string(sid)) {
		m.m.routes.WithLabelValues("local").Inc()
		return RouteResult{Serve: true}
	}
	if r != nil && r.Header.Get(wire.HeaderFlyReplaySrc) != "" {
		m.m.routes.WithLabelValues("serve").Inc()
		return RouteResult{Serve: true}
	}
	loc, found, err := m.loc.locate(string(sid))
	switch {
	case err != nil || !found:
		m.m.routes.WithLabelValues("fallback").Inc()
		if m.s.opts.Router != nil {
			return m.s.opts.Router(sid, r)
		}
		return RouteResult{Serve: true}
	case loc.BootID != m.s.opts.BootID && loc.MachineID != m.s.opts.MachineID && m.sameApp(loc):
		m.m.routes.WithLabelValues("replay").Inc()
		return RouteResult{Instance: loc.MachineID}
	}
	m.m.routes.WithLabelValues("serve").Inc()
	return RouteResult{Serve: true}
}
