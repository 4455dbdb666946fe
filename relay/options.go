package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/promreg"
	"github.com/purrfly/purrfly/internal/randid"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// Defaults applied by New to zero options.
const (
	DefaultHeartbeatInterval   = 30 * time.Second
	DefaultEmptyRoomTimeout    = core.DefaultEmptyRoomTimeout
	DefaultHostConnectTimeout  = core.DefaultHostConnectTimeout
	DefaultDrainTimeout        = 25 * time.Second
	DefaultRequestTimeout      = 5 * time.Second
	DefaultUDPPort             = 7777
	DefaultUDPPortV2           = 7778
	DefaultUDPTimeout          = 10 * time.Second
	DefaultUDPBusyWait         = time.Millisecond
	MaxUDPHold                 = 15 * time.Millisecond // PurrLay's LiteNetLib update
	DefaultAuthTimeout         = 10 * time.Second
	DefaultMessageTimeout      = 10 * time.Second
	DefaultMaxRooms            = core.DefaultMaxRooms
	DefaultMaxPending          = 4096
	DefaultMaxPendingPerSource = 64
	DefaultSlowReceiverTimeout = core.DefaultSlowReceiverTimeout
	// DefaultCleanupInterval is the empty-room cleanup tick (PurrLay's 30 s);
	// New shortens it to EmptyRoomTimeout or HostConnectTimeout when one
	// is smaller.
	DefaultCleanupInterval = 30 * time.Second
	// DefaultLocateTTL is how long a room location learned from the
	// balancer is reused (multi-machine apps).
	DefaultLocateTTL = time.Second
	// DefaultForwardTimeout bounds locating a room's holder and opening
	// the link to it for a forwarded connection.
	DefaultForwardTimeout = 5 * time.Second
	// DefaultActivationLease and DefaultGrantLifetime are host migration's
	// (MIGRATION_HOST_ACTIVATION_TIMEOUT_SECONDS and
	// MIGRATION_GRANT_TIMEOUT_SECONDS).
	DefaultActivationLease = core.DefaultActivationLease
	DefaultGrantLifetime   = core.DefaultGrantLifetime
)

// Options configures a relay Server. The comments name the environment
// variables of the original PurrLay that the command maps onto them.
type Options struct {
	Secret       string // shared SECRET, a list (wire.SendSecret sends, wire.SecretIn accepts); required, wire.ValidSecretList
	BalancerURL  string // BALANCER_URL; empty = standalone (no registration)
	ListenHost   string // HOST: bind address for both listeners (e.g. "127.0.0.1", "0.0.0.0", "::")
	HTTPPort     int    // PORT, default 8081 applied by the caller; 0 = ephemeral
	WSPort       int    // dedicated WebSocket listener, default 6942 by caller; 0 = ephemeral; -1 = disabled
	PublicHost   string // HOST_DOMAIN: host clients connect to (advertised); "" = ListenHost, or 127.0.0.1 for a wildcard
	PublicWSPort int    // advertised WebSocket port (443 behind Fly TLS); 0 = the actual WS listener port (or HTTP port when WSPort is -1)
	Endpoint     string // HOST_ENDPOINT: apiEndpoint URL; "" = http(s)://PublicHost:<actual HTTP port> (MultiMachine: http://ListenHost:<port> when it binds one address)
	Region       string // HOST_REGION
	SSL          bool   // HOST_SSL
	// UDPPort is the LiteNetLib 1.x port (UDP_PORT, the caller applies
	// 7777), for PurrNet builds older than its move to LiteNetLib 2.x: 0 =
	// ephemeral, -1 = not served (7777 is still advertised, as clients
	// need the field). Bound as UDPPortV2 is (UDPHost, UDPSockets,
	// UDPTimeout, UDPFlush); PublicUDPPort (HOST_UDP_PORT) is advertised
	// instead of the bound port when set.
	UDPPort       int
	PublicUDPPort int

	// UDP (LiteNetLib 2.x, PurrNet's desktop, mobile and Editor builds).
	// UDPPortV2 is the port (UDP_PORT_V2, the caller applies 7778): 0 =
	// ephemeral, -1 = 2.x not served (7778 is still advertised, as clients
	// need the field; UDPPort -1 too serves no UDP). UDPHost is the bind
	// address (UDP_HOST): "" = ListenHost, and a
	// wildcard (or "::") means 0.0.0.0, since PurrNet's clients dial IPv4
	// only; on Fly the caller passes fly-global-services' address, the only
	// one whose replies Fly routes. PublicUDPPortV2 (HOST_UDP_PORT_V2) is
	// advertised instead of the bound port when set. UDPSockets (default 1)
	// sockets share the port, each with its own reader. UDPTimeout drops a
	// silent peer (default 10 s: twice PurrNet's client's own). UDPFlush, when
	// positive, is a fixed wait: how long every UDP peer's outgoing frames
	// may wait to leave merged in one datagram (UDP_FLUSH_MS; PurrLay's
	// LiteNetLib waits up to its 15 ms update). Zero (the default) is the
	// busy rule: what a read batch makes leaves at its end, and only a
	// peer woken more often than DefaultUDPBusyWait waits that long for
	// company (litenet.Config.BusyWait). Negative: no peer ever waits
	// (tests on a fake clock). UDPHold (UDP_HOLD_US) is the busy rule's
	// wait in place of DefaultUDPBusyWait, at most MaxUDPHold; negative:
	// the busy rule holds no peer, and what a read batch makes always
	// leaves at its end. A fixed wait (UDPFlush > 0) ignores it.
	UDPPortV2       int
	UDPHost         string
	PublicUDPPortV2 int
	UDPSockets      int
	UDPTimeout      time.Duration
	UDPFlush        time.Duration
	UDPHold         time.Duration

	// PublicEndpoint is the API endpoint clients ping (the balancer lists it
	// as apiEndpoint in /servers) when it differs from Endpoint: a machine
	// of a multi-machine app registers its private address as Endpoint and
	// the app's public URL here. "" = Endpoint.
	PublicEndpoint string
	// MultiMachine makes this relay one machine of a relay app that runs
	// several (see the package doc, "Multi-machine apps"): requests and
	// connections for rooms another machine holds reach the holder (a
	// Fly-Replay before the upgrade, or one forwarding hop after the
	// authentication message). It needs BalancerURL, which it asks where
	// rooms live.
	MultiMachine   bool
	LocateTTL      time.Duration // default 1s: reuse of a room location learned from the balancer
	ForwardTimeout time.Duration // default 5s: locate the holder and open the link to it

	HeartbeatInterval time.Duration // default 30s
	EmptyRoomTimeout  time.Duration // default 300s
	// HostConnectTimeout releases a room whose allocation's host has not
	// connected this long after the allocation (HOST_CONNECT_TIMEOUT_SECONDS,
	// default 60s; PurrNet connects right after allocating): an unused
	// allocation does not hold a room slot for EmptyRoomTimeout.
	HostConnectTimeout time.Duration
	// ActivationLease is host migration's fixed activation lease from a
	// claim (MIGRATION_HOST_ACTIVATION_TIMEOUT_SECONDS, default 60s); it
	// must exceed PurrNet's transition timeout plus HTTP, network and
	// scheduling margin. GrantLifetime is a host's handoff grant's
	// (MIGRATION_GRANT_TIMEOUT_SECONDS, default 30s).
	ActivationLease time.Duration
	GrantLifetime   time.Duration
	DrainTimeout    time.Duration // default 25s; negative = do not wait
	RequestTimeout  time.Duration // default 5s, every call to the balancer
	// MaxRooms bounds the rooms this relay holds (MAX_ROOMS, default
	// DefaultMaxRooms): past it an allocation is relay_full (503, the
	// balancer places the room on another relay).
	MaxRooms int
	// Labels tag this relay for placement (RELAY_LABELS; wire.ParseLabels
	// for the rules): an allocation that requires labels goes only to
	// relays carrying all of them. Reported in every registration.
	Labels map[string]string
	// Capacity is what this relay takes at most, for placement
	// (RELAY_MAX_ROOMS, RELAY_MAX_CONNECTIONS; 0 = no limit). The relay
	// reports it and enforces it itself: with Capacity.MaxRooms rooms (or
	// MaxRooms, when that is lower), or Capacity.MaxConnections
	// connections, a new room is relay_full (503; the balancer places it
	// on another relay). Connections to rooms it holds are never refused
	// for it: a player of a game placed here must be able to join it.
	Capacity wire.Capacity
	// MaxPending and MaxPendingPerSource bound the WebSocket connections
	// between their upgrade and their authentication, in all and per
	// source address (MAX_PENDING_CONNECTIONS, MAX_PENDING_PER_SOURCE;
	// defaults DefaultMaxPending, DefaultMaxPendingPerSource); past them an
	// upgrade is too_many_connections (503). UDP has litenet's own bounds.
	MaxPending, MaxPendingPerSource int
	// ClientIPHeader names the header that carries a request's source
	// address (Fly-Client-IP behind Fly's proxy); "" = the TCP peer.
	ClientIPHeader string
	// AuthTimeout bounds a connection's wait for its authentication
	// message, WebSocket or UDP (AUTH_TIMEOUT_SECONDS, default 10 s).
	AuthTimeout time.Duration
	// MessageTimeout bounds a WebSocket message from its first byte to its
	// last (WEBSOCKET_MESSAGE_TIMEOUT_SECONDS, default 10 s: 64 KiB at
	// 6.5 KB/s): a peer that announces a frame and stalls is dropped then.
	// The wait between messages is not bounded.
	MessageTimeout time.Duration
	// SlowReceiverTimeout is how long a connection's backlog may stay above
	// the soft bound before it is disconnected (slow_receiver; default 2 s;
	// the queue bounds are the routing core's).
	SlowReceiverTimeout time.Duration
	// HTTP bounds the waits of the HTTP and WebSocket ports (a WebSocket
	// connection, once upgraded, is bound by the authentication timeout
	// and the slow-receiver rules instead).
	HTTP wire.HTTPLimits

	// ReachableURL is the public URL players reach this relay through
	// (on Fly the app's URL; reachable.go): until its /ping, asked with
	// fly-prefer-instance-id naming MachineID, is answered by this boot,
	// the relay tells the balancer players cannot reach it and gets no
	// room. "" = reachable from the start.
	ReachableURL string

	Router Router      // nil = serve everything here
	Clock  clock.Clock // nil = clock.Real
	Logger *slog.Logger

	MachineID, ImageRef, Version string // shown in /ping
	BootID                       string // "" = random per process
	Metrics                      prometheus.Registerer
}

// withDefaults validates o and fills its zero values.
func (o Options) withDefaults() (Options, error) {
	if !wire.ValidSecretList(o.Secret) {
		return o, fmt.Errorf("invalid relay options: the shared secret must be 1 to %d comma-separated values of printable ASCII without spaces", wire.MaxSecrets)
	}
	if o.BalancerURL != "" {
		if _, ok := wire.ParseHTTPURL(o.BalancerURL); !ok {
			return o, fmt.Errorf("invalid relay options: balancer URL %q must be an http(s) URL", o.BalancerURL)
		}
	}
	for _, e := range []string{o.Endpoint, o.PublicEndpoint, o.ReachableURL} {
		if e == "" {
			continue
		}
		if _, ok := wire.ParseHTTPURL(e); !ok {
			return o, fmt.Errorf("invalid relay options: endpoint %q must be an http(s) URL", e)
		}
	}
	if o.MultiMachine && o.BalancerURL == "" {
		return o, errors.New("invalid relay options: a multi-machine relay needs a balancer URL (it asks the balancer where rooms live)")
	}
	if err := wire.ValidateLabels(o.Labels); err != nil {
		return o, fmt.Errorf("invalid relay options: %w", err)
	}
	if err := o.Capacity.Validate(); err != nil {
		return o, fmt.Errorf("invalid relay options: %w", err)
	}
	if o.LocateTTL <= 0 {
		o.LocateTTL = DefaultLocateTTL
	}
	if o.ForwardTimeout <= 0 {
		o.ForwardTimeout = DefaultForwardTimeout
	}
	switch {
	case o.HTTPPort < 0 || o.HTTPPort > 65535:
		return o, fmt.Errorf("invalid relay options: HTTP port %d", o.HTTPPort)
	case o.WSPort < -1 || o.WSPort > 65535:
		return o, fmt.Errorf("invalid relay options: WebSocket port %d", o.WSPort)
	case o.PublicWSPort < 0 || o.PublicWSPort > 65535:
		return o, fmt.Errorf("invalid relay options: public WebSocket port %d", o.PublicWSPort)
	case o.UDPPort < -1 || o.UDPPort > 65535 || o.UDPPortV2 < -1 || o.UDPPortV2 > 65535 ||
		o.PublicUDPPortV2 < 0 || o.PublicUDPPortV2 > 65535 || o.PublicUDPPort < 0 || o.PublicUDPPort > 65535:
		return o, errors.New("invalid relay options: UDP port out of range")
	case o.UDPSockets < 0 || o.UDPSockets > 64:
		return o, errors.New("invalid relay options: UDP sockets must be between 1 and 64")
	case o.UDPHold > MaxUDPHold:
		return o, fmt.Errorf("invalid relay options: UDP hold %v above %v", o.UDPHold, MaxUDPHold)
	case len(o.Region) > wire.MaxRegionLen:
		return o, errors.New("invalid relay options: region too long")
	}
	if o.UDPHost == "" {
		o.UDPHost = o.ListenHost
	}
	if ip, err := netip.ParseAddr(o.UDPHost); o.UDPHost == "" || err == nil && ip.IsUnspecified() {
		o.UDPHost = "0.0.0.0"
	}
	if o.UDPSockets == 0 {
		o.UDPSockets = 1
	}
	if o.UDPTimeout <= 0 {
		o.UDPTimeout = DefaultUDPTimeout
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.ActivationLease <= 0 {
		o.ActivationLease = DefaultActivationLease
	}
	if o.GrantLifetime <= 0 {
		o.GrantLifetime = DefaultGrantLifetime
	}
	if o.EmptyRoomTimeout <= 0 {
		o.EmptyRoomTimeout = DefaultEmptyRoomTimeout
	}
	if o.HostConnectTimeout <= 0 {
		o.HostConnectTimeout = DefaultHostConnectTimeout
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.AuthTimeout <= 0 {
		o.AuthTimeout = DefaultAuthTimeout
	}
	if o.MessageTimeout <= 0 {
		o.MessageTimeout = DefaultMessageTimeout
	}
	if o.SlowReceiverTimeout <= 0 {
		o.SlowReceiverTimeout = DefaultSlowReceiverTimeout
	}
	if o.MaxRooms <= 0 {
		o.MaxRooms = DefaultMaxRooms
	}
	o.Labels = maps.Clone(o.Labels) // the caller's map is not ours to share
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxPendingPerSource <= 0 {
		o.MaxPendingPerSource = DefaultMaxPendingPerSource
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	o.Clock = clock.OrReal(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BootID == "" {
		o.BootID = randid.Hex(16)
	}
	if o.Metrics == nil {
		o.Metrics = promreg.New()
	}
	return o, nil
}

// udpBusyWait is the busy rule's wait for UDPFlush and UDPHold: only with
// no fixed wait (zero), none when either is negative, DefaultUDPBusyWait
// unless hold says otherwise.
func udpBusyWait(flush, hold time.Duration) time.Duration {
	switch {
	case flush != 0 || hold < 0:
		return 0
	case hold > 0:
		return hold
	}
	return DefaultUDPBusyWait
}
