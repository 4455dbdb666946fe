package flyaffinity

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/purrfly/purrfly/internal/clock"
)

// Defaults applied by NewWithConfig to zero Config fields.
const (
	DefaultTTL           = 5 * time.Second // Fly's documented internal DNS TTL
	DefaultDNSServer     = "[fdaa::3]:53"  // Fly's internal resolver
	DefaultPeerPort      = 8080
	DefaultLookupTimeout = 2 * time.Second
	DefaultRouteWait     = 250 * time.Millisecond
)

// ErrNoMachines is returned by Owner and Peers when no machine set has ever
// been obtained (it wraps the last lookup error), and by Owner when the set is
// empty.
var ErrNoMachines = errors.New("no machine set known")

// ErrClosed is the lookup error after Close.
var ErrClosed = errors.New("resolver closed")

// Config configures a Resolver. Zero fields take the documented defaults.
type Config struct {
	// App is the Fly app name (FLY_APP_NAME). Empty means off Fly: no DNS
	// lookup is made and the set is empty.
	App string
	// Self is this machine's id (FLY_MACHINE_ID). Empty means off Fly: Route
	// serves every request here.
	Self string
	// TTL is how long a machine set is used before it is looked up again.
	// Default DefaultTTL.
	TTL time.Duration
	// DNSServer is the resolver's host:port. Default DefaultDNSServer.
	DNSServer string
	// PeerPort is the port of the base URLs Peers returns. Default
	// DefaultPeerPort.
	PeerPort int

	// LookupTimeout bounds one DNS lookup (UDP and its TCP retry together).
	// Default DefaultLookupTimeout.
	LookupTimeout time.Duration
	// RouteWait bounds how long Route waits for a due lookup. Default
	// DefaultRouteWait.
	RouteWait time.Duration
	// Logger receives lookup warnings. Nil means slog.Default().
	Logger *slog.Logger
	// Metrics is where the purrfly_flyaffinity_* metrics are registered. Nil
	// means a private registry (the metrics are then not exported).
	Metrics prometheus.Registerer
	// Clock drives expiry. Nil means the wall clock.
	Clock clock.Clock
}

// Resolver answers ownership questions for one machine. Construct it with New
// or NewWithConfig; all methods may be called concurrently.
type Resolver struct {
	// Static after construction.
	cfg    Config        // defaults applied
	qname  string        // "vms.<app>.internal." or "" when App is empty
	clk    clock.Clock   // drives expiry (AfterFunc, see isDue)
	retry  time.Duration // wait after a failed lookup before the next: min(TTL, 1s)
	log    *slog.Logger
	m      *metrics
	ctx    context.Context // cancelled by Close; parent of every lookup
	cancel context.CancelFunc

	cur atomic.Pointer[entry] // the current set; replaced by store; nil before the first lookup ends
	sf  singleflight.Group    // shares one lookup among concurrent callers

	mu      sync.Mutex     // guards closed and every lookups.Add
	closed  bool           // guarded by mu
	lookups sync.WaitGroup // lookups in flight; Close waits for them
}

// New makes a Resolver that asks the default DNS server and reaches peers
// on the default port. app is the app's name (FLY_APP_NAME), self this
// machine's id (FLY_MACHINE_ID; empty off Fly), and ttl how long a looked-up
// set of machines is kept.
func New(app, self string, ttl time.Duration) *Resolver {
	return NewWithConfig(Config{App: app, Self: self, TTL: ttl})
}

// NewWithConfig builds a Resolver from cfg. It makes no network call: the
// first lookup happens when a method first needs the machine set.
func NewWithConfig(cfg Config) *Resolver {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.DNSServer == "" {
		cfg.DNSServer = DefaultDNSServer
	}
	if cfg.PeerPort <= 0 {
		cfg.PeerPort = DefaultPeerPort
	}
	if cfg.LookupTimeout <= 0 {
		cfg.LookupTimeout = DefaultLookupTimeout
	}
	if cfg.RouteWait <= 0 {
		cfg.RouteWait = DefaultRouteWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	r := &Resolver{
		cfg:   cfg,
		clk:   clock.OrReal(cfg.Clock),
		retry: min(cfg.TTL, time.Second),
		log:   cfg.Logger.With("component", "flyaffinity", "app", cfg.App, "self", cfg.Self),
		m:     newMetrics(cfg.Metrics),
	}
	if cfg.App != "" {
		r.qname = "vms." + cfg.App + ".internal."
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// Close cancels a lookup in flight, waits for it to end and stops the expiry
// timer. Afterwards no lookup starts; Route and Owner keep answering from the
// last set. Close is idempotent.
func (r *Resolver) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.lookups.Wait()
	if e := r.cur.Load(); e != nil && e.timer != nil {
		e.timer.Stop()
	}
}
