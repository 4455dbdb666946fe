package balancer

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/internal/promreg"
	"github.com/purrfly/purrfly/internal/randid"
	"github.com/purrfly/purrfly/wire"
)

// Defaults of Options.
const (
	DefaultPort               = 8080
	DefaultHealthInterval     = 10 * time.Second
	DefaultHealthTimeout      = 3 * time.Second
	DefaultRelayTimeout       = 5 * time.Second
	DefaultRelayExpiry        = 3 * 30 * time.Second
	DefaultCleanupInterval    = 30 * time.Second
	DefaultTombstoneRetention = 3600 * time.Second
	DefaultHealthFailures     = 3
	// DefaultMaxEventStreams bounds concurrent /v1/events streams.
	DefaultMaxEventStreams = 100
	// DefaultMaxRelays bounds the relays registered at once (relay
	// machines, not apps: an app of several machines counts each).
	DefaultMaxRelays = 1000
	// DefaultRelayInflight bounds the allocation calls to one relay at
	// once (Options.RelayInflight).
	DefaultRelayInflight = 32
	// DefaultEventPing is the idle ping of an event stream.
	DefaultEventPing = 15 * time.Second
	// DefaultAuthThrottleSources bounds the failed-auth throttle's table.
	DefaultAuthThrottleSources = limit.DefaultThrottleSources

	// pendingRetention bounds how long an indeterminate allocation pins its
	// room name to the relay that may hold it. PurrNet retries for ~110 s and
	// the relay republishes every 30 s, so either the room shows up or the
	// retries are long over by then.
	pendingRetention = 5 * time.Minute
	// maxPendingAllocations bounds the pending allocations held at once;
	// past it an indeterminate outcome is answered as ever but not
	// remembered (its exact retry is placed afresh).
	maxPendingAllocations = 16384
	// maxPlacementTries bounds how many relays one allocation tries when a
	// relay cannot be reached (the request was certainly not delivered) or
	// says it is draining.
	maxPlacementTries = 3
	// DefaultMaxRoomsPerSource is Options.MaxRoomsPerSource's default: far
	// above the rooms one address's players host at once (a host allocates
	// one room a session), far below a fleet's capacity.
	DefaultMaxRoomsPerSource = 100
	// DefaultMaxTombstones bounds the tombstone table (Options.MaxTombstones):
	// a released room writes two (its incarnation's fence and its name's
	// release mark), about 48 bytes each.
	DefaultMaxTombstones = 1 << 19
	// maxRetiredBoots bounds the boot ids remembered per endpoint as replaced,
	// so their delayed heartbeats are refused without a proof round trip.
	maxRetiredBoots = 8
	// maxIdleRelayConns bounds the idle keep-alive connections kept to one
	// relay endpoint (the default HTTPClient).
	maxIdleRelayConns = 256
	// maxIdleConns bounds them over every relay.
	maxIdleConns = 4096
	// maxIDLen bounds boot ids and epochs.
	maxIDLen = 128
	// maxEndpointLen bounds a relay's endpoint URL.
	maxEndpointLen = 512
	// maxHeartbeatSeconds caps a relay's reported heartbeat interval (its
	// expiry is then at most three days).
	maxHeartbeatSeconds = 86400
	// maxInfoLen bounds informational strings (machine id, image, version).
	maxInfoLen = 256
)

// Default per-source rates: far above what a game's players do (a host
// allocates once a session, retrying once a second at most), far below
// a flood (3,000 allocations in 0.6 s from one address).
var (
	DefaultAllocateRate = limit.PerMinute(120, 60)
	DefaultJoinRate     = limit.PerMinute(600, 300)
	// DefaultAuthFailureRate: ten failed admin authentications at once
	// from one source, then one every six seconds.
	DefaultAuthFailureRate = limit.PerMinute(10, 10)
	// DefaultSecretFailureRate: ten calls with a wrong SECRET at once from
	// one source (internal routes, /metrics from the internet), then one
	// a second. Relays behind one address share it: a short refill keeps
	// one misconfigured relay from locking the others out (secretGuard).
	// The relay's is the same (limit.DefaultSecretFailureRate).
	DefaultSecretFailureRate = limit.DefaultSecretFailureRate
)

// Options configures a Server. Zero values take the defaults above.
type Options struct {
	// Secret is the SECRET shared with every relay, a comma-separated list
	// for rotation: the first is sent, any is accepted; required,
	// wire.ValidSecretList.
	Secret string
	// ListenHost is the HOST bind address ("" binds every interface).
	ListenHost string
	// Port is the PORT to listen on (the command passes 8080); 0 = ephemeral.
	Port int
	// Region, MachineID, ImageRef and Version are reported by /ping.
	Region, MachineID, ImageRef, Version string
	// BootID identifies this process; "" = random per process.
	BootID string

	// HealthInterval is how often every relay's /ping is probed.
	HealthInterval time.Duration
	// HealthTimeout bounds one probe.
	HealthTimeout time.Duration
	// RelayTimeout bounds every other call to a relay (allocation, proof).
	RelayTimeout time.Duration
	// HTTP bounds the waits of the balancer's HTTP server.
	HTTP wire.HTTPLimits
	// AllocateRate and JoinRate limit POST /allocate_ws and GET /join per
	// source address (ALLOCATE_RATE_PER_MINUTE, JOIN_RATE_PER_MINUTE),
	// answered 429 with Retry-After past them. Zero takes the defaults
	// (DefaultAllocateRate, DefaultJoinRate), a negative Every turns the
	// limit off.
	AllocateRate, JoinRate limit.Rate
	// ClientIPHeader names the header that carries the caller's address
	// (Fly-Client-IP on Fly, where Fly's proxy sets it); "" = the TCP peer.
	ClientIPHeader string
	// HealthFailures is how many consecutive failed probes remove a relay
	// (a successful probe or a newer heartbeat starts the count again); a
	// single lost probe must not make every room of a relay unjoinable.
	HealthFailures int
	// RelayExpiry removes a relay with no heartbeat for this long, or for
	// three of its reported heartbeat intervals when that is longer
	// (wire.RegisterRequest.HeartbeatSeconds).
	RelayExpiry time.Duration
	// CleanupInterval is the tombstone (and orphaned route) cleanup tick.
	CleanupInterval time.Duration
	// TombstoneRetention is ROOM_PUBLICATION_TOMBSTONE_RETENTION_SECONDS;
	// non-positive means DefaultTombstoneRetention.
	TombstoneRetention time.Duration
	// MaxRoomsPerSource bounds the live rooms one source address's
	// allocations (POST /allocate_ws) hold at once, those being made
	// included (BALANCER_MAX_ROOMS_PER_SOURCE): past it an allocation of a
	// new room is 429 too_many_rooms. 0 takes DefaultMaxRoomsPerSource, a
	// negative value turns the cap off. Reservations of the admin API and
	// Go callers (Server.Allocate) are not counted.
	MaxRoomsPerSource int
	// MemoryBudget is the memory the balancer may use, in bytes (0: the
	// runtime's GOMEMLIMIT, else its cgroup's limit, else the machine's
	// memory). New rooms are refused (503 balancer_full) while the live heap
	// is past 80% of it (40% when GOMEMLIMIT is not set at or under it).
	MemoryBudget int64
	// readHeap replaces the live heap's reading (tests).
	readHeap func() int64
	// MaxTombstones bounds the tombstone table (BALANCER_MAX_TOMBSTONES;
	// non-positive means DefaultMaxTombstones): past it the oldest goes
	// first, before its retention (package doc: Tombstones).
	MaxTombstones int

	// Placement is the strategy of placements that name none
	// (BALANCER_PLACEMENT): StrategyLeast (""), StrategyMost or
	// StrategyRandom. Region and labels come first either way (Placement).
	Placement Strategy
	// Rand returns a number in [0, n) for StrategyRandom (nil =
	// math/rand/v2's IntN: safe for concurrent use, no shared lock). Tests
	// inject a deterministic one.
	Rand func(n int) int
	// AdminKeys are the operator's keys of the /v1 admin API (ADMIN_KEY,
	// comma-separated, so a new key can be added, callers rolled, the old
	// one removed), sent as "Authorization: Bearer <key>". Each must be at
	// least MinAdminKeyLen characters, wire.ValidSecret, and not the
	// shared Secret; one under GoodAdminKeyLen is warned about. None: New
	// generates one (Server.GeneratedAdminKey), unless RequireAdminKey.
	AdminKeys []string
	// RequireAdminKey refuses to start without AdminKeys (purrctl sets it
	// on Fly: a generated key would be lost in the logs of a machine).
	RequireAdminKey bool
	// TrustProxy takes the source address of /v1 requests (the failed-auth
	// throttle, the audit log) from X-Forwarded-For's last hop, the
	// address the proxy in front of the balancer appended
	// (BALANCER_TRUST_PROXY): the hops before it are the client's to write.
	// Behind a chain of proxies the last hop is the previous proxy's
	// address, shared by every client of it. Off, and always when
	// ClientIPHeader is set and present, it is that header or the TCP peer.
	TrustProxy bool
	// AdminCORSOrigins are the browser origins allowed to call /v1
	// (ADMIN_CORS_ORIGINS, exact matches); none = no CORS on /v1.
	AdminCORSOrigins []string
	// SSEQueryKey accepts the admin key as ?key= on /v1/events
	// (ADMIN_SSE_QUERY_KEY): EventSource cannot set headers, but a query
	// string lands in proxy logs, so it is off by default.
	SSEQueryKey bool
	// AuthFailureRate limits failed /v1 authentications per source
	// (default DefaultAuthFailureRate); past it /v1 answers 429 throttled.
	AuthFailureRate limit.Rate
	// SecretFailureRate limits calls with a wrong SECRET per source on the
	// internal routes and on /metrics from the internet (default
	// DefaultSecretFailureRate; a negative Every: no limit); past it they
	// answer 429 throttled.
	SecretFailureRate limit.Rate
	// AuthThrottleSources bounds the sources each failed-auth throttle
	// (the admin keys', the SECRET's) remembers (default
	// DefaultAuthThrottleSources; the least recent goes first).
	AuthThrottleSources int
	// MaxEventStreams bounds concurrent GET /v1/events streams (default
	// DefaultMaxEventStreams); past it: 429 too_many_streams.
	MaxEventStreams int
	// MaxRelays bounds the relays registered at once (default
	// DefaultMaxRelays): a new endpoint past it is refused with 503
	// too_many_relays (retryable) until one is gone; the registered ones
	// go on as before.
	MaxRelays int
	// RelayInflight bounds the allocation calls the balancer makes to one
	// relay at once (default DefaultRelayInflight; BALANCER_RELAY_INFLIGHT):
	// a relay at the bound is passed over for the next candidate, and an
	// allocation that can go nowhere else is 429 instance_busy (retryable),
	// so one slow relay cannot gather every allocation's request.
	RelayInflight int
	// StandbyFor, when set, makes this machine the standby of the primary
	// machine it names (BALANCER_STANDBY_FOR; standby.go): it serves only
	// while that machine does not answer, and yields when it does.
	StandbyFor string
	// Peers finds the app's other balancer machines (nil funcs: a lone
	// balancer, serving at once).
	Peers Peers
	// ClaimWait bounds a booting primary's wait for running standbys to
	// yield (default DefaultClaimWait); PeerCheck is how often a serving
	// standby looks for its primary, and a primary for standbys (default
	// DefaultPeerCheck); PeerTimeout bounds one such call (default
	// DefaultPeerTimeout).
	ClaimWait, PeerCheck, PeerTimeout time.Duration
	// SettleWindow: for this long after it starts serving, allocations,
	// and calls for rooms not known yet, answer 503 balancer_settling
	// while relays republish their rooms (BALANCER_SETTLE_SECONDS; 0: none).
	SettleWindow time.Duration
	// EventPing is the interval of the ": ping" comment on an idle event
	// stream (default DefaultEventPing).
	EventPing time.Duration

	// Clock is the time source (nil = the wall clock).
	Clock clock.Clock
	// Logger receives the logs (nil = slog.Default()).
	Logger *slog.Logger
	// HTTPClient calls the relays (nil = a client with RelayTimeout).
	HTTPClient *http.Client
	// Metrics registers the purrfly_balancer_* metrics (nil = a private
	// registry, served at /metrics either way when it is also a Gatherer).
	Metrics prometheus.Registerer
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if !wire.ValidSecretList(o.Secret) {
		return o, fmt.Errorf("the shared SECRET must be 1 to %d comma-separated values, each printable ASCII without spaces, at most %d bytes", wire.MaxSecrets, wire.MaxSecretLen)
	}
	if o.Port < 0 || o.Port > 65535 {
		return o, fmt.Errorf("port %d is out of range", o.Port)
	}
	if o.BootID == "" {
		o.BootID = randid.Hex(16)
	}
	if len(o.BootID) > maxIDLen {
		return o, errors.New("boot id is too long")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HealthInterval, DefaultHealthInterval)
	def(&o.HealthTimeout, DefaultHealthTimeout)
	def(&o.RelayTimeout, DefaultRelayTimeout)
	def(&o.RelayExpiry, DefaultRelayExpiry)
	def(&o.CleanupInterval, DefaultCleanupInterval)
	def(&o.TombstoneRetention, DefaultTombstoneRetention)
	switch {
	case o.MaxRoomsPerSource == 0:
		o.MaxRoomsPerSource = DefaultMaxRoomsPerSource
	case o.MaxRoomsPerSource < 0:
		o.MaxRoomsPerSource = 0 // no cap
	}
	if o.MaxTombstones <= 0 {
		o.MaxTombstones = DefaultMaxTombstones
	}
	def(&o.EventPing, DefaultEventPing)
	def(&o.ClaimWait, DefaultClaimWait)
	def(&o.PeerCheck, DefaultPeerCheck)
	def(&o.PeerTimeout, DefaultPeerTimeout)
	if o.SettleWindow < 0 {
		o.SettleWindow = 0
	}
	if len(o.StandbyFor) > maxInfoLen {
		return o, errors.New("standby's primary machine id is too long")
	}
	if o.AuthFailureRate.Every == 0 {
		o.AuthFailureRate = DefaultAuthFailureRate
	}
	// A burst of none would throttle a source for good after its first
	// failure, its right key included: at least one failure refills.
	o.AuthFailureRate.Burst = max(o.AuthFailureRate.Burst, 1)
	if o.SecretFailureRate.Every == 0 {
		o.SecretFailureRate = DefaultSecretFailureRate
	}
	o.SecretFailureRate.Burst = max(o.SecretFailureRate.Burst, 1)
	if o.AuthThrottleSources <= 0 {
		o.AuthThrottleSources = DefaultAuthThrottleSources
	}
	if o.MaxEventStreams <= 0 {
		o.MaxEventStreams = DefaultMaxEventStreams
	}
	if o.MaxRelays <= 0 {
		o.MaxRelays = DefaultMaxRelays
	}
	if o.RelayInflight <= 0 {
		o.RelayInflight = DefaultRelayInflight
	}
	if err := checkAdminKeys(o.AdminKeys, o.Secret, o.RequireAdminKey); err != nil {
		return o, err
	}
	if o.AllocateRate.Every == 0 {
		o.AllocateRate = DefaultAllocateRate
	}
	if o.JoinRate.Every == 0 {
		o.JoinRate = DefaultJoinRate
	}
	if o.HealthFailures <= 0 {
		o.HealthFailures = DefaultHealthFailures
	}
	st, err := ParseStrategy(string(o.Placement))
	if err != nil {
		return o, err
	}
	o.Placement = st
	if o.Rand == nil {
		o.Rand = rand.IntN
	}
	o.Clock = clock.OrReal(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Every allocation in flight holds one connection to its relay;
		// keep that many open afterwards (up to maxIdleRelayConns), or a
		// burst wider than the idle pool ends in a new TCP connection per
		// call. Relay answers are small JSON: no gzip.
		t.MaxIdleConns = maxIdleConns
		t.MaxIdleConnsPerHost = maxIdleRelayConns
		t.DisableCompression = true
		t.ResponseHeaderTimeout = o.RelayTimeout
		o.HTTPClient = &http.Client{Timeout: o.RelayTimeout, Transport: t}
	}
	if o.Metrics == nil {
		o.Metrics = promreg.New()
	}
	return o, nil
}
