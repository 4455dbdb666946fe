package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/udptransport"
	"github.com/purrfly/purrfly/relay/internal/wstransport"
	"github.com/purrfly/purrfly/wire"
)

// Stats is a point-in-time count of what the relay holds.
type Stats struct {
	Rooms       int
	Connections int
}

// Server is one relay process. Construct it with New, then Start; end it
// with Shutdown (drain) or Close (now).
type Server struct {
	opts     Options                 // static after New (PublicHost and Endpoint completed by Start)
	log      *slog.Logger            // static
	clock    clock.Clock             // static
	m        *serverMetrics          // static
	gatherer prometheus.Gatherer     // static: what /metrics serves
	core     *core.Core              // static
	ws       *wstransport.Transport  // static: accepts and runs WebSocket connections and links
	reg      *registrar              // nil when standalone
	mesh     *mesh                   // nil unless Options.MultiMachine
	udp      *udptransport.Transport // nil when UDP is off; set by Start
	udp1     *udptransport.Transport // LiteNetLib 1.x: nil when off; set by Start
	retire   retirement              // its own lock (retire.go)
	retireM  retireMetrics           // static
	reach    reachability            // url static, reached set once by the probe (reachable.go)
	// secretThrottle throttles wrong SECRETs per source (secretguard.go;
	// safe for concurrent use; set by New, replaced only by tests before
	// Start).
	secretThrottle *limit.AuthThrottle
	// refusedLog paces the log of calls refused for a wrong SECRET
	// (internally locked).
	refusedLog limit.Paced

	cleanupInterval time.Duration // static

	// Set by Start before anything is served; static afterwards.
	httpLn, wsLn        net.Listener
	httpSrv, wsSrv      *http.Server
	advertisedWSPort    int
	advertisedUDPPortV2 int
	advertisedUDPPort   int
	ctx                 context.Context
	cancel              context.CancelCauseFunc

	bg       sync.WaitGroup // serve loops, cleanup tick, registrar, reachability probe, retire loop
	sessions sync.WaitGroup // sessions: WebSocket connections, UDP peers and their routed first messages, links toward holders
	raw      rawConns       // accepted TCP conns, force-closed if a close hangs

	mu      lockrank.Mutex
	started bool // guarded by mu
	closed  bool // guarded by mu: no new sessions (admitSession)
	ended   bool // guarded by mu: Shutdown or Close ran
}

// New validates opts and applies defaults. It binds nothing.
func New(opts Options) (*Server, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:            o,
		log:             o.Logger.With("component", "relay"),
		clock:           o.Clock,
		cleanupInterval: min(DefaultCleanupInterval, o.EmptyRoomTimeout, o.HostConnectTimeout),
		mu:              lockrank.Mutex{Class: lockrank.Server},
		raw:             rawConns{mu: lockrank.Mutex{Class: lockrank.RawConns}},
		retire:          retirement{mu: lockrank.Mutex{Class: lockrank.Retirement}, done: make(chan struct{})},
		secretThrottle:  limit.NewAuthThrottle(limit.DefaultSecretFailureRate, o.Clock, limit.DefaultThrottleSources),
		refusedLog:      limit.Paced{Gap: refusedLogGap},
	}
	s.gatherer = prometheus.DefaultGatherer
	if g, ok := o.Metrics.(prometheus.Gatherer); ok {
		s.gatherer = g
	}
	maxRooms := o.MaxRooms
	if c := o.Capacity.MaxRooms; c > 0 && c < o.MaxRooms {
		maxRooms = c
	}
	s.core, err = core.New(core.Config{
		Clock: o.Clock, Log: s.log, Metrics: o.Metrics,
		EmptyRoomTimeout: o.EmptyRoomTimeout, HostConnectTimeout: o.HostConnectTimeout, SlowReceiverTimeout: o.SlowReceiverTimeout,
		ActivationLease: o.ActivationLease, GrantLifetime: o.GrantLifetime,
		MaxRooms: maxRooms, MaxConns: o.Capacity.MaxConnections,
	})
	if err != nil {
		return nil, err
	}
	if s.m, err = newServerMetrics(o.Metrics); err != nil {
		return nil, err
	}
	if s.retireM, err = newRetireMetrics(o.Metrics); err != nil {
		return nil, err
	}
	s.reach.url = o.ReachableURL
	wc := wstransport.Config{
		Core: s.core, Clock: o.Clock, Log: s.log, Metrics: o.Metrics,
		AuthTimeout: o.AuthTimeout, MessageTimeout: o.MessageTimeout, ClientIPHeader: o.ClientIPHeader,
		MaxPending: o.MaxPending, MaxPendingPerSource: o.MaxPendingPerSource,
		Admit: s.admitSession,
	}
	if o.MultiMachine {
		wc.Forward = func(c *core.Conn, first *buf.Buf, udp bool) bool { return s.mesh.forward(s.ctx, c, first, udp) }
	}
	if s.ws, err = wstransport.New(wc); err != nil {
		return nil, err
	}
	if o.BalancerURL != "" {
		s.reg = newRegistrar(s)
		s.reg.state = s.registrationState
		s.core.SetNotifier(s.reg)
	}
	if o.MultiMachine {
		if s.mesh, err = newMesh(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Start binds both listeners, serves them, starts the empty-room cleanup
// and only then the registration goroutine, so the balancer's first /ping
// of this boot always finds it listening.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.ended {
		return errors.New("relay already started")
	}
	var err error
	s.httpLn, err = net.Listen("tcp", net.JoinHostPort(s.opts.ListenHost, strconv.Itoa(s.opts.HTTPPort)))
	if err != nil {
		return fmt.Errorf("failed to listen on the HTTP port: %w", err)
	}
	if s.opts.WSPort >= 0 {
		s.wsLn, err = net.Listen("tcp", net.JoinHostPort(s.opts.ListenHost, strconv.Itoa(s.opts.WSPort)))
		if err != nil {
			s.httpLn.Close()
			return fmt.Errorf("failed to listen on the WebSocket port: %w", err)
		}
	}
	// The context and the mesh's addresses come first: a UDP peer may
	// connect (and authenticate, maybe forwarded) the moment its socket is
	// bound.
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	self := s.advertisedAddrs()
	if s.mesh != nil {
		s.mesh.start(self)
	}
	if err := s.listenUDP(); err != nil {
		s.cancel(err)
		s.httpLn.Close()
		if s.wsLn != nil {
			s.wsLn.Close()
		}
		return err
	}
	s.started = true
	s.completeAddresses(self)

	errLog := slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	newSrv := func(h http.Handler) *http.Server {
		srv := &http.Server{
			Handler:     h,
			ErrorLog:    errLog,
			ConnState:   s.raw.track,
			ConnContext: withRawConn,
		}
		s.opts.HTTP.Apply(srv)
		return srv
	}
	s.httpSrv = newSrv(s.mainHandler())
	s.bg.Go(func() { _ = s.httpSrv.Serve(s.httpLn) })
	if s.wsLn != nil {
		s.wsSrv = newSrv(s.wsHandler())
		s.bg.Go(func() { _ = s.wsSrv.Serve(s.wsLn) })
	}
	s.bg.Go(s.cleanupLoop)
	if s.reg != nil {
		s.reg.info = s.relayInfo()
		s.bg.Go(func() { s.reg.run(s.ctx) })
		if s.reach.url != "" {
			s.bg.Go(func() { s.probeReachable(s.ctx) })
		}
	}
	s.log.Info("relay listening", "http", s.httpURLLocked(), "ws", s.wsURLLocked(), "udp", s.udpAddrLocked(), "udp1", s.udp1AddrLocked(),
		"publicHost", s.opts.PublicHost, "port", s.advertisedWSPort, "udpPort", s.advertisedUDPPort, "udpPortV2", s.advertisedUDPPortV2,
		"bootId", s.opts.BootID)
	return nil
}

// advertised is how clients and the other machines reach a started relay.
type advertised struct {
	publicHost string // Options.PublicHost, completed
	endpoint   string // Options.Endpoint, completed
	wsPort     int    // the WebSocket port
}

// advertisedAddrs is the advertised host, WebSocket port and endpoint: the
// options', completed from the bound TCP listeners. It changes nothing
// (completeAddresses does, once the UDP socket is bound too).
func (s *Server) advertisedAddrs() advertised {
	httpPort := s.httpLn.Addr().(*net.TCPAddr).Port
	self := advertised{publicHost: s.opts.PublicHost, endpoint: s.opts.Endpoint, wsPort: httpPort}
	if s.wsLn != nil {
		self.wsPort = s.wsLn.Addr().(*net.TCPAddr).Port
	}
	if s.opts.PublicWSPort != 0 {
		self.wsPort = s.opts.PublicWSPort
	}
	if self.publicHost == "" {
		self.publicHost = s.opts.ListenHost
		if ip := net.ParseIP(s.opts.ListenHost); s.opts.ListenHost == "" || (ip != nil && ip.IsUnspecified()) {
			self.publicHost = "127.0.0.1"
		}
	}
	if self.endpoint == "" {
		scheme, host := "http", self.publicHost
		if s.opts.SSL {
			scheme = "https"
		}
		// Every machine of a multi-machine app shares the public host:
		// its own endpoint is its own address (when it binds one).
		if ip := net.ParseIP(s.opts.ListenHost); s.opts.MultiMachine && s.opts.ListenHost != "" && (ip == nil || !ip.IsUnspecified()) {
			scheme, host = "http", s.opts.ListenHost
		}
		self.endpoint = (&url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(httpPort))}).String()
	}
	return self
}

// completeAddresses fills the advertised host, ports and endpoint: self
// (advertisedAddrs) and the bound UDP socket's port.
func (s *Server) completeAddresses(self advertised) {
	s.opts.PublicHost, s.opts.Endpoint, s.advertisedWSPort = self.publicHost, self.endpoint, self.wsPort
	s.advertisedUDPPortV2 = DefaultUDPPortV2
	if s.udp != nil {
		s.advertisedUDPPortV2 = int(s.udp.Addr().Port())
	}
	if s.opts.PublicUDPPortV2 != 0 {
		s.advertisedUDPPortV2 = s.opts.PublicUDPPortV2
	}
	s.advertisedUDPPort = DefaultUDPPort
	if s.udp1 != nil {
		s.advertisedUDPPort = int(s.udp1.Addr().Port())
	}
	if s.opts.PublicUDPPort != 0 {
		s.advertisedUDPPort = s.opts.PublicUDPPort
	}
}

func (s *Server) relayInfo() wire.RelayInfo {
	return wire.RelayInfo{
		BootID:         s.opts.BootID,
		Endpoint:       s.opts.Endpoint,
		Host:           s.opts.PublicHost,
		Region:         s.opts.Region,
		Port:           s.advertisedWSPort,
		UDPPort:        s.advertisedUDPPort,
		UDPPortV2:      s.advertisedUDPPortV2,
		SSL:            s.opts.SSL,
		MachineID:      s.opts.MachineID,
		PublicEndpoint: s.opts.PublicEndpoint,
		ImageRef:       s.opts.ImageRef,
		Version:        s.opts.Version,
		Labels:         s.opts.Labels,
		// The bounds it enforces: its room bound is never unlimited
		// (MaxRooms applies when Capacity.MaxRooms does not).
		Capacity: s.core.Capacity(),
	}
}

// cleanupLoop is the empty-room tick, driven by the injected clock; it
// also forgets expired handover answers (they hold rooms' secrets).
func (s *Server) cleanupLoop() {
	clock.Every(s.ctx, s.clock, s.cleanupInterval, func() {
		s.core.Expire()
		if s.mesh != nil {
			s.mesh.given.sweep(s.clock.Now())
		}
		if s.udp != nil {
			s.udp.Sweep() // NAT tokens: the 1.x transport has none
		}
	})
}

// HTTPURL is http://<listen addr>:<port> of the main port ("" before Start).
func (s *Server) HTTPURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.httpURLLocked()
}

// httpURLLocked is HTTPURL for callers holding s.mu.
func (s *Server) httpURLLocked() string {
	if s.httpLn == nil {
		return ""
	}
	return "http://" + s.httpLn.Addr().String()
}

// WSURL is ws://<listen addr>:<port> of the dedicated WebSocket listener,
// or of the HTTP port when that listener is disabled ("" before Start).
func (s *Server) WSURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wsURLLocked()
}

// wsURLLocked is WSURL for callers holding s.mu.
func (s *Server) wsURLLocked() string {
	switch {
	case s.wsLn != nil:
		return "ws://" + s.wsLn.Addr().String()
	case s.httpLn != nil:
		return "ws://" + s.httpLn.Addr().String()
	}
	return ""
}

// UDPAddr is the bound address of the LiteNetLib socket ("" before Start
// or with UDP off).
func (s *Server) UDPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.udpAddrLocked()
}

// UDP1Addr is the bound address of the LiteNetLib 1.x socket ("" before
// Start or when 1.x is off).
func (s *Server) UDP1Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.udp1AddrLocked()
}

func (s *Server) udp1AddrLocked() string {
	if s.udp1 == nil {
		return ""
	}
	return s.udp1.Addr().String()
}

func (s *Server) udpAddrLocked() string {
	if s.udp == nil {
		return ""
	}
	return s.udp.Addr().String()
}

// BootID is this process's boot id.
func (s *Server) BootID() string { return s.opts.BootID }

// Stats counts rooms and open connections.
func (s *Server) Stats() Stats {
	return Stats{Rooms: s.core.NumRooms(), Connections: s.core.NumConns()}
}

// Shutdown drains: it stops taking new rooms (allocation answers
// ErrDraining, /ping says draining), tells the balancer with a heartbeat,
// waits until no connection is left or DrainTimeout (or ctx) passes, then
// closes every WebSocket with 1012, unregisters the remaining rooms, and
// stops listeners and goroutines. It returns ctx's error if ctx ended the
// wait.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.end() {
		return nil
	}
	s.core.SetDraining()
	s.log.Info("relay draining", "connections", s.core.NumConns(), "rooms", s.core.NumRooms())
	if s.reg != nil {
		hctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		s.reg.do(hctx, s.ctx.Done(), func(ctx context.Context) { s.reg.heartbeat(ctx) })
		cancel()
	}
	var waitErr error
	if s.opts.DrainTimeout > 0 && s.core.NumConns() > 0 {
		t := s.clock.NewTimer(s.opts.DrainTimeout)
	wait:
		for s.core.NumConns() > 0 {
			select {
			case <-s.core.Idle():
			case <-t.C():
				break wait
			case <-ctx.Done():
				break wait
			}
		}
		t.Stop()
		waitErr = ctx.Err()
	}
	s.finish(ctx, true)
	return waitErr
}

// Close ends the relay now: every WebSocket is closed with 1012, listeners
// and goroutines stop. It does not wait for rooms to empty.
func (s *Server) Close() error {
	if !s.end() {
		return nil
	}
	s.core.SetDraining()
	s.finish(context.Background(), false)
	return nil
}

// end marks the server ended; it reports false if it already was.
func (s *Server) end() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.ended = true
	if !s.started {
		s.closed = true
		return false
	}
	return true
}

// admitSession counts a new session (WebSocket or UDP peer) unless the
// server is closing; finish waits for the sessions counted.
func (s *Server) admitSession() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.sessions.Add(1)
	return true
}

// sessionGrace is how long finish lets WebSocket close handshakes run
// before it closes the remaining TCP connections outright.
const sessionGrace = 6 * time.Second

func (s *Server) finish(ctx context.Context, graceful bool) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()

	// No new connections or requests.
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	for _, srv := range []*http.Server{s.httpSrv, s.wsSrv} {
		if srv != nil {
			if srv.Shutdown(sctx) != nil {
				srv.Close()
			}
		}
	}
	cancel()

	s.core.CloseAll(core.ReasonShutdown)
	s.waitSessions(ctx, graceful)

	if graceful && s.reg != nil {
		// Release what is left at the balancer at once instead of waiting
		// for it to notice the boot is gone.
		s.core.RemoveAll()
		uctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		s.reg.do(uctx, s.ctx.Done(), s.reg.flushOutbox)
		cancel()
	}
	if s.udp != nil {
		s.udp.Close()
	}
	if s.udp1 != nil {
		s.udp1.Close()
	}
	s.cancel(errors.New("relay closed"))
	s.bg.Wait()
	s.core.Wait()
	if s.mesh != nil {
		s.mesh.close()
	}
	s.log.Info("relay stopped")
}

// waitSessions waits for every WebSocket session to end; past the grace
// (shorter for Close, or ctx) it closes their TCP connections outright so
// nothing hangs.
func (s *Server) waitSessions(ctx context.Context, graceful bool) {
	done := make(chan struct{})
	go func() {
		s.sessions.Wait()
		close(done)
	}()
	grace := sessionGrace
	if !graceful {
		grace = time.Second
	}
	t := time.NewTimer(grace) // wall clock: it bounds TCP close handshakes, and Close must not wait for a Fake clock's Advance
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	case <-ctx.Done():
	}
	s.log.Warn("closing connections that did not finish their close handshake")
	s.raw.closeAll()
	if s.udp != nil {
		s.udp.Close() // every UDP peer ends at once
	}
	if s.udp1 != nil {
		s.udp1.Close()
	}
	<-done
}

// listenUDP binds the LiteNetLib sockets: 2.x (UDPHost:UDPPortV2), whose
// transport is the core's NAT introducer, and 1.x (UDPHost:UDPPort), each
// unless its port is -1. A failure closes what was bound.
func (s *Server) listenUDP() error {
	cfg := udptransport.Config{
		Core: s.core, Clock: s.clock, Log: s.log, Metrics: s.opts.Metrics,
		Host: s.opts.UDPHost, Timeout: s.opts.UDPTimeout, AuthTimeout: s.opts.AuthTimeout,
		Flush: s.opts.UDPFlush, BusyWait: udpBusyWait(s.opts.UDPFlush, s.opts.UDPHold), Sockets: s.opts.UDPSockets,
		Admit: s.admitSession, Sessions: &s.sessions,
	}
	if s.mesh != nil {
		cfg.MayForward = s.mesh.mayForward
		cfg.Forward = func(c *core.Conn, first *buf.Buf, udp bool) bool { return s.mesh.forward(s.ctx, c, first, udp) }
	}
	if s.opts.UDPPortV2 >= 0 {
		cfg.Port = s.opts.UDPPortV2
		u, err := udptransport.Listen(cfg)
		if err != nil {
			return err
		}
		s.udp = u
		s.core.SetNAT(u)
	}
	if s.opts.UDPPort >= 0 {
		cfg.Port, cfg.Version = s.opts.UDPPort, litenet.V1
		u, err := udptransport.Listen(cfg)
		if err != nil {
			if s.udp != nil {
				s.udp.Close()
				s.udp = nil
			}
			return fmt.Errorf("LiteNetLib 1.x: %w", err)
		}
		s.udp1 = u
	}
	return nil
}
