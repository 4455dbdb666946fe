package udptransport

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/delivery"
	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// earlyMax bounds what a peer may send while its authentication is being
// routed (real clients send nothing before [3]).
const earlyMax = 64

// Backlog is how many LiteNetLib messages a peer may have queued (not yet
// in flight) before the flush stops pulling its frames: beyond it they
// stay in the connection's queue, where the slow-receiver rules apply.
const Backlog = 128

// pingInterval is how often peers are pinged, as PurrLay and PurrNet's
// client do (LiteNetLib's own default is 1 s).
const pingInterval = 900 * time.Millisecond

// Config is what the transport needs of the relay. Everything is static
// once Listen returns.
type Config struct {
	Core    *core.Core
	Clock   clock.Clock
	Log     *slog.Logger
	Metrics prometheus.Registerer

	Host        string        // the bind address (a wildcard is 0.0.0.0: PurrNet's clients dial IPv4)
	Port        int           // 0: ephemeral
	Timeout     time.Duration // a silent peer is dropped
	AuthTimeout time.Duration // a peer that does not authenticate by then is dropped
	Flush       time.Duration // positive: how long every woken peer's frames may wait to leave merged (litenet.Config.FlushDelay)
	BusyWait    time.Duration // without Flush: how long a busy peer's frames may wait (litenet.Config.BusyWait)
	Sockets     int           // sockets sharing the port, each with its own reader
	// Version is the LiteNetLib wire version served: 2.x (the zero value)
	// or 1.x, the older PurrNet builds', which carries no NAT
	// introduction. Its metrics are purrfly_relay_udp1_*.
	Version litenet.Version

	// Admit counts a new session unless the relay is closing (then the
	// peer is refused); Sessions is what it counts on. A peer's session
	// ends when it leaves, and a routed authentication is a session too.
	Admit    func() bool
	Sessions *sync.WaitGroup
	// MayForward reports whether a first message names a room this
	// machine does not hold, and Forward carries a connection whose room
	// another machine holds there (a multi-machine relay); both nil on a
	// single machine.
	MayForward func(first []byte) bool
	Forward    func(c *core.Conn, first *buf.Buf, udp bool) bool
}

// Transport owns the LiteNetLib endpoint and implements its Handler, and
// the core's NAT introduction (core.NAT). Static after Listen but nat,
// which has its own lock, and ep, set once litenet.Listen returns (the
// socket readers may already be calling the Handler).
type Transport struct {
	cfg Config
	ep  atomic.Pointer[litenet.Endpoint]
	nat natTable
	m   *metrics
}

// Listen binds the LiteNetLib socket (Host:Port) and starts serving it;
// it registers the transport's metrics.
func Listen(cfg Config) (*Transport, error) {
	cfg.Clock = clock.OrReal(cfg.Clock)
	t := &Transport{cfg: cfg}
	t.nat.init(cfg.Clock)
	// Metrics first: once the socket is bound, only Close may fail.
	m, err := newMetrics(cfg.Metrics, cfg.Version, t.stats)
	if err != nil {
		return nil, err
	}
	t.m = m
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	network := "udp4"
	if ip, err := netip.ParseAddr(cfg.Host); err == nil && ip.Is6() && !ip.Is4In6() {
		network = "udp6"
	}
	ep, err := litenet.Listen(network, addr, litenet.Config{
		Key:               "PurrNet",
		Handler:           t,
		Clock:             cfg.Clock,
		PingInterval:      pingInterval,
		DisconnectTimeout: cfg.Timeout,
		PendingTimeout:    cfg.AuthTimeout,
		MaxMessage:        wire.MaxMessageSize + 1, // a frame and its delivery method, as a WebSocket message
		FlushDelay:        max(cfg.Flush, 0),
		BusyWait:          cfg.BusyWait,
		Sockets:           cfg.Sockets,
		Version:           cfg.Version,
	})
	if err != nil {
		m.unregister(cfg.Metrics)
		return nil, fmt.Errorf("failed to listen on the UDP port: %w", err)
	}
	t.ep.Store(ep)
	return t, nil
}

// Addr is the bound address of the socket.
func (t *Transport) Addr() netip.AddrPort { return t.ep.Load().LocalAddr() }

// Close ends every peer at once and closes the socket.
func (t *Transport) Close() { _ = t.ep.Load().Close() }

// Sweep forgets expired NAT introduction tokens (the relay's cleanup
// tick).
func (t *Transport) Sweep() { t.nat.sweep() }

// stats are the endpoint's counters (zero before it is bound).
func (t *Transport) stats() litenet.Stats {
	if ep := t.ep.Load(); ep != nil {
		return ep.Stats()
	}
	return litenet.Stats{}
}

// Connected: a LiteNetLib peer proved itself; it becomes a connection of
// the core, bound to the peer before anything can reach it. A closing
// relay refuses it.
func (t *Transport) Connected(p *litenet.Peer) bool {
	if !t.cfg.Admit() {
		return false
	}
	uc := &conn{t: t, p: p}
	uc.initLock()
	uc.c = t.cfg.Core.MakeConn(uc)
	p.Tag = uc
	t.cfg.Core.Publish(uc.c)
	return true
}

// Receive hands one message to the peer's connection, in a pooled buffer
// with the core's headroom.
func (t *Transport) Receive(p *litenet.Peer, m litenet.Method, data []byte) {
	uc := p.Tag.(*conn)
	b := buf.Get(buf.Headroom + len(data))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], data)
	b.Method = delivery.Of(m)
	uc.deliver(b)
}

// Flush pulls the peer's queued frames into LiteNetLib.
func (t *Transport) Flush(p *litenet.Peer) bool {
	uc, ok := p.Tag.(*conn)
	return ok && uc.flush()
}

// Disconnected ends the peer's connection.
func (t *Transport) Disconnected(p *litenet.Peer, why litenet.Reason) {
	p.Tag.(*conn).gone(why)
}

// Nat takes NAT introduction requests (nat.go; a 1.x endpoint delivers
// none).
func (t *Transport) Nat(from netip.AddrPort, n litenet.NatPacket) {
	if ep := t.ep.Load(); ep != nil && n.Kind == litenet.NatRequest && t.cfg.Version == litenet.V2 {
		t.nat.request(ep, from, n.Internal, n.Token)
	}
}

// CanPunch: a UDP peer of this transport (not a link from another
// machine, nor a 1.x peer: 1.x carries no NAT introduction).
func (t *Transport) CanPunch(tr core.Transport) bool {
	uc, ok := tr.(*conn)
	return ok && uc.t == t && t.cfg.Version == litenet.V2
}

// Expect registers a NAT introduction token for a host and a client.
func (t *Transport) Expect(token string, host, client core.Transport) {
	t.nat.expect(token, host.(*conn).p.Addr(), client.(*conn).p.Addr())
}
