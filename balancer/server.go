package balancer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/limit"
)

// Server is the balancer. Construct with New, then Start; Handler serves
// without a listener (benchmarks, embedding).
type Server struct {
	// Static after New.
	opts      Options
	clock     clock.Clock
	log       *slog.Logger
	client    *http.Client
	ownClient bool // client was made by New: close its idle connections on shutdown
	metrics   *metrics
	handler   http.Handler

	relays *relayClient // the calls to relays (static)
	st     *state       // the data and its rules (internally locked)
	// allocs and joins limit allocations and joins per source address.
	allocs, joins *limit.Buckets
	// The /v1 admin API: its keys (generatedKey is the one New made when
	// none was configured, else ""), the failed-auth throttle (safe for
	// concurrent use) and the event hub (idem).
	adminKeys    adminKeys
	generatedKey string
	authThrottle *limit.AuthThrottle
	// secretThrottle is the failed-auth throttle of the calls made with
	// the shared SECRET (internalauth.go; safe for concurrent use).
	secretThrottle *limit.AuthThrottle
	// beforeAdmit, when set (tests only, before the requests it is for),
	// runs between the check of a /v1 request's credential and the
	// throttle's decision.
	beforeAdmit func()
	// onBootWait, when set (tests only, before the watches it is for), is
	// called when a boot watch starts waiting.
	onBootWait func()
	events     *eventHub
	history    statsHistory // internally locked: the dashboard's last hour
	// internalAuth paces the log of calls refused for a wrong SECRET
	// (internally locked; Gap internalAuthLogGap).
	internalAuth limit.Paced

	draining atomic.Bool // Shutdown began, or a standby yielded: /ping says so
	// The standby's role (standby.go): role is written by startRole's
	// loop and the yield route; yieldCh is closed once (yieldOnce) on
	// yield; settleUntil (unix nanos) ends the settle window.
	role        atomic.Int32
	yieldOnce   sync.Once
	yieldCh     chan struct{}
	settleUntil atomic.Int64
	// stopping is closed when Shutdown or Close begins (stopOnce): boot
	// watches (bootwatch.go) answer at once instead of holding Shutdown.
	stopping chan struct{}
	stopOnce sync.Once
	fresh    freshConns // connections without a request yet (conns.go)

	// Guarded by mu: the listener's life.
	mu     sync.Mutex
	srv    *http.Server
	ln     net.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup // background loops and the serve goroutine
}

// New validates opts and builds a Server. Nothing listens until Start.
func New(opts Options) (*Server, error) {
	own := opts.HTTPClient == nil
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("failed to configure the balancer: %w", err)
	}
	s := &Server{
		opts:      o,
		clock:     o.Clock,
		log:       o.Logger,
		client:    o.HTTPClient,
		ownClient: own,
		allocs:    limit.NewBuckets(o.AllocateRate, o.Clock, 0),
		stopping:  make(chan struct{}),
		yieldCh:   make(chan struct{}),
		joins:     limit.NewBuckets(o.JoinRate, o.Clock, 0),

		internalAuth: limit.Paced{Gap: internalAuthLogGap},
	}
	if len(o.AdminKeys) == 0 {
		s.generatedKey = generateAdminKey()
		o.AdminKeys = []string{s.generatedKey}
		s.opts.AdminKeys = o.AdminKeys
	}
	for _, k := range o.AdminKeys {
		if len(k) < GoodAdminKeyLen {
			s.log.Warn("an admin key is shorter than 32 characters; use a longer random one", "key", Fingerprint(k))
		}
	}
	s.adminKeys = newAdminKeys(o.AdminKeys)
	s.authThrottle = limit.NewAuthThrottle(o.AuthFailureRate, o.Clock, o.AuthThrottleSources)
	s.secretThrottle = limit.NewAuthThrottle(o.SecretFailureRate, o.Clock, o.AuthThrottleSources)
	if s.metrics, err = newMetrics(o.Metrics, s); err != nil {
		return nil, err
	}
	s.relays = &relayClient{client: o.HTTPClient, secret: o.Secret, timeout: o.RelayTimeout, clock: o.Clock, m: s.metrics}
	s.st = newState(o, s.relays, s.metrics.eventDrops.Inc)
	s.events = s.st.events
	s.handler = s.routes()
	return s, nil
}

// GeneratedAdminKey is the admin key New generated because none was
// configured (print it once; it is never logged), or "".
func (s *Server) GeneratedAdminKey() string { return s.generatedKey }

// BootID is this process's boot id (reported by /ping and to relays).
func (s *Server) BootID() string { return s.opts.BootID }

// Handler is the whole mux, wrapped in wire.Common.
func (s *Server) Handler() http.Handler { return s.handler }

// Start binds ListenHost:Port and serves in the background, together with
// the health-check and cleanup loops.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("balancer already started")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.opts.ListenHost, strconv.Itoa(s.opts.Port)))
	if err != nil {
		return fmt.Errorf("failed to listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ln, s.cancel = ln, cancel
	s.srv = &http.Server{
		Handler:   s.handler,
		ErrorLog:  slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnState: s.fresh.track,
	}
	s.opts.HTTP.Apply(s.srv)
	srv := s.srv
	s.wg.Add(5)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("balancer server stopped", "err", err)
		}
	}()
	go func() { defer s.wg.Done(); s.healthLoop(ctx) }()
	go func() { defer s.wg.Done(); s.cleanupLoop(ctx) }()
	go func() { defer s.wg.Done(); s.eventLoop(ctx) }()
	go func() { defer s.wg.Done(); s.historyLoop(ctx) }()
	s.startRole(ctx)
	s.log.Info("balancer listening", "addr", ln.Addr().String(), "boot", s.opts.BootID)
	return nil
}

// Port is the bound port (0 before Start).
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return 0
	}
	return s.ln.Addr().(*net.TCPAddr).Port
}

// URL is the base URL to reach the balancer: http://127.0.0.1:port when it
// listens on every interface, else http://ListenHost:port.
func (s *Server) URL() string {
	host := s.opts.ListenHost
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(s.Port()))
}

// Shutdown stops the loops and lets in-flight requests finish until ctx
// ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.stop(func(srv *http.Server) error {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
			return err
		}
		return nil
	})
}

// Close stops at once, dropping in-flight requests.
func (s *Server) Close() error {
	return s.stop(func(srv *http.Server) error { return srv.Close() })
}

func (s *Server) stop(halt func(*http.Server) error) error {
	s.draining.Store(true)
	s.stopOnce.Do(func() { close(s.stopping) })
	s.mu.Lock()
	srv, cancel := s.srv, s.cancel
	s.mu.Unlock()
	var err error
	s.events.close() // event streams would hold Shutdown until its deadline
	if srv != nil {
		cancel()
		if err = s.shutdownServer(srv, halt); err != nil {
			err = fmt.Errorf("failed to stop the balancer: %w", err)
		}
	}
	s.wg.Wait()
	if s.ownClient {
		s.client.CloseIdleConnections()
	}
	return err
}
