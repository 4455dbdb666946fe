package wstransport

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/wsframe"
	"github.com/purrfly/purrfly/wire"
)

// DefaultCloseGrace bounds a graceful close (kicked, host left, shutdown,
// ...) from the close to the end of the connection: the flush and the
// close handshake. A writer blocked on a peer that stopped reading (a full
// TCP window) would otherwise never return, and its connection,
// goroutines, socket and queue would stay forever; past the grace the
// socket is dropped (conn.Closed).
const DefaultCloseGrace = 5 * time.Second

// flushTimeout bounds the writes of frames still queued when a connection
// is closed gracefully (the [4] of a failed auth, a kick, a shutdown).
const flushTimeout = 2 * time.Second

// closeFrameTimeout bounds the write of the relay's close frame, as
// coder/websocket's 5 s did.
const closeFrameTimeout = 5 * time.Second

// Forwarder carries a connection whose first message names a room another
// machine holds to that machine (the relay's mesh): it reports false when
// the connection is served here. udp says the peer speaks PurrNet's UDP
// framing.
type Forwarder func(c *core.Conn, first *buf.Buf, udp bool) bool

// Config is what the transport needs of the relay. Everything is static
// once New returns.
type Config struct {
	Core        *core.Core
	Clock       clock.Clock
	Log         *slog.Logger
	Metrics     prometheus.Registerer
	AuthTimeout time.Duration // a connection's wait for its first message
	// MessageTimeout bounds a message from its first byte to its last (a
	// stalled frame); 0: no bound. The wait between messages is unbounded.
	MessageTimeout time.Duration
	CloseGrace     time.Duration // 0: DefaultCloseGrace
	// MaxPending and MaxPendingPerSource bound the connections between
	// their upgrade and their authentication, in all and per source
	// (ClientIPHeader names the header that carries it; "": the TCP peer);
	// a full pool pushes out its oldest (pending.go). 0: no bound.
	MaxPending, MaxPendingPerSource int
	ClientIPHeader                  string
	// Admit counts a new session unless the relay is closing (then the
	// upgrade is refused, draining); the session ends with Peer.Ended.
	Admit func() bool
	// Forward, when not nil, carries a connection whose room another
	// machine holds there (a multi-machine relay).
	Forward Forwarder
}

// PendingCount is how many connections wait between their upgrade and
// their authentication.
func (t *Transport) PendingCount() int { return t.pending.count() }

// Transport is the relay's WebSocket transport: it upgrades connections
// (Accept) and runs each as a core connection with a reader and a writer
// goroutine; it also runs the links toward other machines (link.go).
type Transport struct {
	cfg     Config       // static
	pending *pendingPool // static: the connections not authenticated yet
	m       metrics
}

// metrics are the transport's series.
type metrics struct {
	refusedUpgrades prometheus.Counter // upgrades past the bound on unauthenticated connections
	evictedPending  prometheus.Counter // unauthenticated connections pushed out by newer upgrades
	batches         prometheus.Counter // batches written (one system call per 32 KiB)
}

// New is the transport of cfg.Core; it registers its metrics.
func New(cfg Config) (*Transport, error) {
	if cfg.CloseGrace <= 0 {
		cfg.CloseGrace = DefaultCloseGrace
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	t := &Transport{cfg: cfg, pending: newPendingPool(cfg.MaxPendingPerSource, cfg.MaxPending)}
	t.m.refusedUpgrades = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_relay_refused_upgrades_total",
		Help: "WebSocket upgrades refused: too many connections waiting to authenticate (in all or from one source).",
	})
	t.m.evictedPending = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_relay_evicted_pending_total",
		Help: "WebSocket connections not authenticated yet closed to make room for a newer upgrade (the pool of them was full).",
	})
	t.m.batches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_relay_write_batches_total",
		Help: "Batches of queued frames written by connection writers (WebSocket: one system call per 32 KiB).",
	})
	for _, c := range []prometheus.Collector{t.m.refusedUpgrades, t.m.evictedPending, t.m.batches} {
		if err := cfg.Metrics.Register(c); err != nil {
			return nil, fmt.Errorf("failed to register relay WebSocket metrics: %w", err)
		}
	}
	return t, nil
}

// Peer is what the relay knows of a connection before its upgrade.
type Peer struct {
	// Forwarded: a link from another machine of the app (wire.PathForward),
	// never forwarded again nor bound by Pending.
	Forwarded bool
	// UDP: a link carrying a UDP peer (wire.HeaderLinkFraming), which
	// speaks PurrNet's UDP framing.
	UDP bool
	// Ended runs once when an admitted session ends: its goroutines have
	// returned, or its upgrade failed.
	Ended func()
}

// Accept checks an upgrade request, upgrades it and runs the connection;
// it returns once the connection is authenticated (or over), the
// connection running on goroutines of its own. A bad handshake, a relay
// past its Pending bound or closing get a JSON error.
func (t *Transport) Accept(w http.ResponseWriter, r *http.Request, p Peer) error {
	if err := checkHandshake(w, r); err != nil {
		return err
	}
	var slot *pendingSlot
	if !p.Forwarded {
		// Bounded from the upgrade to the authentication, which this
		// goroutine reads (run) before Accept returns.
		var evicted bool
		if slot, evicted = t.pending.acquire(wire.ClientIP(r, t.cfg.ClientIPHeader)); slot == nil {
			t.m.refusedUpgrades.Inc()
			w.Header().Set("Retry-After", "1")
			return wire.ErrTooManyConns
		}
		if evicted {
			t.m.evictedPending.Inc()
		}
		defer t.pending.release(slot)
	}
	if !t.cfg.Admit() {
		return wire.ErrDraining
	}
	hw := &wsframe.Hijacker{ResponseWriter: w}
	ws, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // WebGL builds connect from any origin
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		p.Ended()
		return nil // Accept has answered
	}
	fc := hw.Writer()
	if fc == nil || !t.pending.bind(slot, fc.Conn) { // nil cannot happen: Accept hijacked through hw (TestCoderLeavesTheSocketToUs)
		_ = ws.CloseNow()
		p.Ended()
		return nil
	}
	t.run(ws, fc, hw.Reader(wire.MaxMessageSize, t.cfg.MessageTimeout), p, slot)
	return nil
}
