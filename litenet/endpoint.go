package litenet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
)

// Defaults applied to zero Config fields.
const (
	DefaultPingInterval      = time.Second
	DefaultDisconnectTimeout = 10 * time.Second
	DefaultCloseGrace        = 2 * time.Second
	DefaultTick              = 10 * time.Millisecond
	DefaultMaxPeers          = 65536
	DefaultMaxPending        = 4096
	DefaultMaxPendingPerIP   = 64
	DefaultPendingTimeout    = 10 * time.Second
	DefaultMaxMessage        = 65535 + 64
	DefaultReplyRate         = 20000
)

// readBatch is the datagrams one read takes on a server's socket,
// clientReadBatch on a client's (Dial), which one peer's traffic rarely
// fills: a reader holds a buffer of readBufSize for each, 128 KiB at
// readBatch and 16 at clientReadBatch, and purrctl bench's load opens a
// thousand clients. readBufSize is the largest datagram accepted
// (LiteNetLib sends at most MaxPacketSize).
const (
	readBatch       = 64
	clientReadBatch = 8
	readBufSize     = 2048
)

// Config configures an Endpoint. Zero values take the defaults above.
type Config struct {
	// Key is the connect key a server accepts ("PurrNet"); a client
	// endpoint (Dial) accepts no connections and leaves it empty.
	Key     string
	Handler Handler
	Clock   clock.Clock
	// Version is the wire version spoken: V2 (LiteNetLib 2.x, the zero
	// value) or V1 (1.x). The two share protocol id 13, so an endpoint
	// speaks one and each has its own port.
	Version Version

	PingInterval      time.Duration // LiteNetLib: 1 s; PurrNet's client 900 ms
	DisconnectTimeout time.Duration // silence after which a peer is dropped
	CloseGrace        time.Duration // a graceful Close waits this long for acks
	Tick              time.Duration // timer resolution of resends and pings
	// FlushDelay lets a woken peer wait up to this long for its flush, so
	// that what is sent to it meanwhile leaves merged in one datagram, as
	// LiteNetLib sends on its update loop (every 15 ms by default). Zero
	// flushes at once: after the read batch that woke the peer, or on the
	// flusher for a Send from elsewhere.
	FlushDelay time.Duration
	// SendFlushes, with no FlushDelay, has a Send from outside the reader
	// flush on the sender's goroutine when no flush is running, instead of
	// handing the peer to the flusher goroutine: one hand-off less per
	// message. For a Handler whose Flush and Disconnected take no lock a
	// sender may hold (the Go client's link; not the relay).
	SendFlushes bool
	// BusyWait, with no FlushDelay, is how long a busy peer may wait for
	// company: a woken peer is flushed at the end of the read batch that
	// woke it (one sendmmsg for every peer the batch touched), pongs with
	// the rest, unless the batches that woke it lately came less than
	// BusyWait apart on average, so that more will likely come within the
	// wait; then it waits up to BusyWait and what comes meanwhile leaves
	// merged. Zero: no peer waits. Either way an ack with nothing to ride
	// with waits up to a Tick for company, as with a FlushDelay.
	BusyWait time.Duration
	// Arrivals has the kernel stamp each datagram's arrival on the socket
	// (SO_TIMESTAMPNS, Linux), for Peer.Arrival: a load generator times
	// the network and the server it measures without its own scheduling
	// (purrctl bench). Elsewhere, or off, Arrival is the zero time.
	Arrivals bool

	MaxPeers        int           // connections at once (pending included)
	MaxPending      int           // accepted but not confirmed (Peer.Confirm) connections
	MaxPendingPerIP int           // the same, per source address
	PendingTimeout  time.Duration // an unconfirmed connection is dropped after this
	MaxMessage      int           // the largest reassembled message (at most 80 KiB)
	ReplyRate       int           // answers to unknown senders per second and socket
	// Sockets is how many sockets share the port (SO_REUSEPORT, Linux),
	// each with its own reader; default 1.
	Sockets int
}

func (c Config) withDefaults() (Config, error) {
	if c.Handler == nil {
		return c, errors.New("litenet: a Handler is required")
	}
	c.Clock = clock.OrReal(c.Clock)
	orDefault(&c.PingInterval, DefaultPingInterval)
	orDefault(&c.DisconnectTimeout, DefaultDisconnectTimeout)
	orDefault(&c.CloseGrace, DefaultCloseGrace)
	orDefault(&c.Tick, DefaultTick)
	orDefault(&c.PendingTimeout, DefaultPendingTimeout)
	orDefault(&c.MaxPeers, DefaultMaxPeers)
	orDefault(&c.MaxPending, DefaultMaxPending)
	orDefault(&c.MaxPendingPerIP, DefaultMaxPendingPerIP)
	orDefault(&c.MaxMessage, DefaultMaxMessage)
	orDefault(&c.ReplyRate, DefaultReplyRate)
	orDefault(&c.Sockets, 1)
	if c.Version > V1 {
		return c, fmt.Errorf("litenet: unknown wire version %d", c.Version)
	}
	c.FlushDelay = max(c.FlushDelay, 0)
	c.SendFlushes = c.SendFlushes && c.FlushDelay == 0
	c.BusyWait = max(c.BusyWait, 0)
	if c.MaxMessage > pktClasses[len(pktClasses)-1] {
		return c, fmt.Errorf("litenet: MaxMessage %d is over %d", c.MaxMessage, pktClasses[len(pktClasses)-1])
	}
	return c, nil
}

// orDefault sets *v to def when it is not positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Handler is what the application of an Endpoint implements. Connected,
// Receive and Disconnected of one peer are never concurrent and come in
// that order; Flush may run beside them. None may block for long (a
// socket's reader or flusher is waiting), and none is called with a lock
// of the Endpoint held: each may call the Peer's methods.
type Handler interface {
	// Connected: a new peer sent its first packet after its connect request
	// was accepted (a client: the server accepted). Returning false refuses
	// it: it is disconnected at once, and nothing more (no Receive, Flush
	// or Disconnected) is called for it.
	Connected(p *Peer) bool
	// Receive: one message; data is valid only during the call.
	Receive(p *Peer, m Method, data []byte)
	// Flush runs when the peer was woken by Peer.Wake (or window space
	// freed after a Flush that left data behind): the handler may Send
	// now. It reports whether it left data behind because the peer's
	// Backlog was at the handler's limit; it is then called again when
	// window space frees or the queue empties (so "more" with nothing
	// queued would call it again and again).
	Flush(p *Peer) (more bool)
	// Disconnected: the peer is gone (or going: its Disconnect is being
	// repeated); nothing more is delivered.
	Disconnected(p *Peer, why Reason)
	// Nat: a NAT introduction message (nat.go).
	Nat(from netip.AddrPort, n NatPacket)
}

// Stats are an Endpoint's counters since it started.
type Stats struct {
	Datagrams, Bytes uint64 // received
	Sent, SendErrors uint64 // datagrams written (every one: answers to strangers too), lost to errors
	Resent           uint64 // reliable packets sent again
	Malformed        uint64 // datagrams or packets dropped as malformed
	Unknown          uint64 // datagrams from addresses with no connection
	RateLimited      uint64 // answers to unknown senders not sent (ReplyRate)
	Refused          uint64 // connect requests refused (bad key, full tables)
	Evicted          uint64 // unconfirmed connections pushed out by newer ones
	Accepted         uint64 // connections accepted
	Peers, Pending   int    // now
}

type counters struct {
	datagrams, bytes, resent, malformed, unknown, limited, refused, evicted, accepted atomic.Uint64
}

// Endpoint is a LiteNetLib node (2.x, or 1.x: Config.Version) on a UDP port: a server (Listen)
// accepting any number of peers, or a client (Dial) of one. See the
// package doc for its goroutines and locks.
type Endpoint struct {
	cfg   Config // static
	h     Handler
	clk   clock.Clock
	epoch time.Time
	socks []*socket // static after start
	peers peerTable
	pend  pendingTable
	stats counters

	cookieKey [32]byte // static: keys the peer ids of accepts (accept.go)
	closed    atomic.Bool
	done      chan struct{}
	wg        sync.WaitGroup
	ctx       context.Context
	cancel    context.CancelFunc
}

// now is the Endpoint's time: nanoseconds since it started (monotonic).
func (e *Endpoint) now() int64 { return int64(e.clk.Now().Sub(e.epoch)) }

// Listen opens a server endpoint on addr ("127.0.0.1:7778", ":0"). The
// network is "udp4" or "udp6"; PurrNet's clients speak IPv4 only.
func Listen(network, addr string, cfg Config) (*Endpoint, error) {
	if cfg.Key == "" {
		return nil, errors.New("litenet: a server needs a connect key")
	}
	e, err := newEndpoint(cfg)
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{}
	if e.cfg.Sockets > 1 {
		lc.Control = reusePort
	}
	for i := range e.cfg.Sockets {
		pc, err := lc.ListenPacket(context.Background(), network, addr)
		if err != nil {
			e.closeSockets()
			return nil, fmt.Errorf("failed to listen on UDP %s: %w", addr, err)
		}
		c := pc.(*net.UDPConn)
		if i == 0 && e.cfg.Sockets > 1 {
			addr = c.LocalAddr().String() // an ephemeral port: the others join it
		}
		if err := e.addSocket(c, readBatch); err != nil {
			c.Close()
			e.closeSockets()
			return nil, err
		}
	}
	e.start()
	return e, nil
}

func newEndpoint(cfg Config) (*Endpoint, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Endpoint{cfg: c, h: c.Handler, clk: c.Clock, done: make(chan struct{})}
	e.epoch = e.clk.Now()
	_, _ = rand.Read(e.cookieKey[:]) // crypto/rand.Read never fails (Go 1.24+)
	e.peers.init()
	e.pend.init()
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

func (e *Endpoint) addSocket(c *net.UDPConn, batch int) error {
	_ = c.SetReadBuffer(4 << 20)
	_ = c.SetWriteBuffer(4 << 20)
	rd, err := newReader(c, e.cfg.Arrivals, batch)
	if err != nil {
		return fmt.Errorf("failed to set up the UDP reader: %w", err)
	}
	wr, err := newWriter(c)
	if err != nil {
		return fmt.Errorf("failed to set up the UDP writer: %w", err)
	}
	s := &socket{
		e:     e,
		c:     c,
		rd:    rd,
		v1:    e.cfg.Version == V1,
		out:   newOutBatch(wr),
		poke:  make(chan struct{}, 1),
		wheel: newWheel(int64(e.cfg.Tick), e.now()),
		rate:  tokenBucket{rate: float64(e.cfg.ReplyRate), burst: float64(max(1, e.cfg.ReplyRate/10))},

		flushMu: lockrank.Mutex{Class: lockrank.LiteFlush},
		dirtyMu: lockrank.Mutex{Class: lockrank.LiteDirty},
	}
	s.rate.tokens = s.rate.burst
	s.wakeAt.Store(e.now() + int64(e.cfg.Tick)) // the flusher's first timer
	e.socks = append(e.socks, s)
	return nil
}

func (e *Endpoint) start() {
	for _, s := range e.socks {
		e.wg.Go(s.readLoop)
		e.wg.Go(s.flushLoop)
	}
}

// LocalAddr is the address the endpoint's sockets are bound to.
func (e *Endpoint) LocalAddr() netip.AddrPort {
	return e.socks[0].c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Config is the endpoint's configuration with its defaults filled in.
func (e *Endpoint) Config() Config { return e.cfg }

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	st := Stats{
		Datagrams:   e.stats.datagrams.Load(),
		Bytes:       e.stats.bytes.Load(),
		Resent:      e.stats.resent.Load(),
		Malformed:   e.stats.malformed.Load(),
		Unknown:     e.stats.unknown.Load(),
		RateLimited: e.stats.limited.Load(),
		Refused:     e.stats.refused.Load(),
		Evicted:     e.stats.evicted.Load(),
		Accepted:    e.stats.accepted.Load(),
		Peers:       int(e.peers.n.Load()),
		Pending:     e.pend.count(),
	}
	for _, s := range e.socks {
		st.Sent += s.sent.Load() + s.direct.Load()
		st.SendErrors += s.sendErrs.Load() + s.directErrs.Load()
	}
	return st
}

// Close ends the endpoint at once: every peer gets one Disconnect and
// Handler.Disconnected (ReasonShutdown), then the sockets close and every
// goroutine returns. Close graceful peers first (Peer.Close(true)) and
// wait for them to go, to deliver what they still have queued. A Handler
// must not call Close (it waits for the goroutines that call the Handler).
func (e *Endpoint) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	close(e.done)
	e.cancel()
	// Readers and flushers stop first (each finishes the batch or flush in
	// progress), so no peer is added behind the sweep and the Disconnects
	// below are the last datagrams.
	for _, s := range e.socks {
		_ = s.c.SetReadDeadline(time.Unix(1, 0))
	}
	e.wg.Wait()
	for _, p := range e.peers.all() {
		var d [9]byte
		var bye []byte
		p.mu.Lock()
		live := p.state != stateGone && p.state != stateShutdown
		if c := p.creditLocked(); live && p.state != stateOutgoing && c.dgrams >= 1 && c.bytes >= len(d) {
			bye = AppendDisconnect(d[:0], p.connNum, p.connectTime)
			p.countOutLocked(1, len(bye))
		}
		if live {
			p.state, p.reason = stateGone, ReasonShutdown
			p.releaseLocked()
		} else {
			p.state = stateGone
		}
		p.mu.Unlock()
		if bye != nil {
			if p.s.v1 {
				bye[0] = toV1(bye[0])
			}
			p.s.writeRaw(bye, p.addr)
		}
		e.notify(p, ReasonShutdown)
		e.forget(p)
	}
	e.closeSockets()
	return nil
}

func (e *Endpoint) closeSockets() {
	for _, s := range e.socks {
		s.c.Close()
	}
}

// notify calls Handler.Disconnected once for p. It takes rmu, so the caller
// holds no lock of p.
// connected tells the handler of a new peer; a refused one is closed at
// once and owed nothing more. The caller holds p.rmu.
func (e *Endpoint) connected(p *Peer) {
	p.up = true
	if !e.h.Connected(p) {
		// Disconnect at once, and never a Handler call again: not even
		// Flush (the handler keeps nothing for it, maybe not even Tag).
		p.up, p.notified = false, true
		p.refused.Store(true)
		p.mu.Lock()
		p.shutdownLocked(e.now(), ReasonClosed)
		p.mu.Unlock()
		p.wake()
	}
	p.signalReadyLocked()
}

func (e *Endpoint) notify(p *Peer, why Reason) {
	p.rmu.Lock()
	e.notifyLocked(p, why)
	p.rmu.Unlock()
}

func (e *Endpoint) notifyLocked(p *Peer, why Reason) {
	defer p.signalReadyLocked()
	if p.notified {
		return
	}
	p.notified = true
	if p.up {
		e.h.Disconnected(p, why)
	}
}

// forget drops p from the peer and pending tables.
func (e *Endpoint) forget(p *Peer) {
	e.peers.remove(p)
	e.pend.remove(p)
}

// Confirm takes p out of the pending table: the application accepts it
// for good (the relay: it authenticated). An unconfirmed peer is dropped
// after PendingTimeout and may be evicted by newer connection attempts.
func (p *Peer) Confirm() {
	p.mu.Lock()
	p.confirmed = true
	p.mu.Unlock()
	p.e.pend.remove(p)
}

// reusePort sets SO_REUSEPORT so that several sockets share a port.
func reusePort(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = setReusePort(fd) })
	if err != nil {
		return err
	}
	return serr
}
