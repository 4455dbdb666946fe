package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// Mode says who sends in a traffic run.
type Mode string

// Modes of a traffic run.
const (
	// FanIn: every client sends to its room's host ([2][sender][payload]
	// arrives at the host).
	FanIn Mode = "fan-in"
	// FanOut: every host sends SEND_ONE to each client of its room in turn.
	FanOut Mode = "fan-out"
	// Both: fan-in and fan-out at once.
	Both Mode = "both"
)

// ErrInvalidOptions wraps every error of Options validation (a usage
// mistake, not a failed run).
var ErrInvalidOptions = errors.New("invalid bench options")

// Defaults of Options, small enough for a 2-core machine.
const (
	DefaultRooms        = 10
	DefaultClients      = 10
	DefaultSize         = 64
	DefaultWindow       = 4
	DefaultDuration     = 10 * time.Second
	DefaultWarmup       = time.Second
	DefaultSetupTimeout = 60 * time.Second
	DefaultMaxMessages  = 200_000_000
	DefaultDialParallel = 64
	// MinSize is the smallest payload: sender index (4 bytes) and send time
	// (8 bytes).
	MinSize = 12
	// MaxSize keeps a fan-out SEND_ONE ([1][target:4][payload]) within one
	// PurrNet message.
	MaxSize = 65535 - 5
	// MaxConnections bounds one run (each costs a file descriptor on both
	// sides of loopback).
	MaxConnections = 200_000
	// sourceIPSpan is how many connections share one 127.0.0.x source
	// address before the next one is used (the ephemeral port range is
	// about 28,000 ports per address pair).
	sourceIPSpan = 16_000
	// MaxUDPConnections bounds a UDP run: every load socket binds an
	// ephemeral port of the unspecified address (litenet.Dial does), so
	// the sockets of one run share Linux's default range of 28,232 ports.
	MaxUDPConnections = 28_000
)

// Options configure a Run. Zero values take the defaults above.
type Options struct {
	Rooms   int  // rooms in the run
	Clients int  // clients per room (each room also has one host)
	Size    int  // payload bytes per message, >= MinSize
	Mode    Mode // default FanIn
	// Rate is messages per second per client and direction; 0 is closed
	// loop: each sender keeps Window messages in flight and sends the next
	// when one arrives.
	Rate float64
	// Window is the closed loop's messages in flight per client and
	// direction (a fan-out host keeps Window per client of its room).
	Window   int
	Duration time.Duration // measured window
	Warmup   time.Duration // traffic before the measured window, not counted

	// Transport is how the load reaches the relay: client.TransportWebSocket
	// (default) or client.TransportUDP, LiteNetLib 2.x to the relay's
	// udpPortV2. Over UDP the baseline is a plain UDP echo server
	// (KindUDPEcho) and the load's baseline connections plain UDP sockets.
	Transport client.Transport
	// Delivery is the LiteNetLib method a UDP run's messages are sent
	// with (default DefaultUDPDelivery); WebSocket has no choice.
	Delivery Delivery
	method   wire.Delivery // Delivery's method, set by withDefaults
	// PeerFlush is how long what a UDP load peer sends may wait to leave
	// merged (client.DialOptions.UDPFlush): PurrNet's client sends once per
	// network tick. Default DefaultPeerFlush; negative sends at once.
	PeerFlush time.Duration
	// ServerProcs is the GOMAXPROCS of every server child (the relay and
	// the baseline alike; 0: the machine's), as on a Fly shared-cpu-1x
	// machine (1), where the relay runs in production.
	ServerProcs int
	// RelayFlush is the relay child's UDP_FLUSH_MS as a duration (0: the
	// relay's default, the busy rule; else a fixed wait, whole
	// milliseconds).
	RelayFlush time.Duration

	// Baseline also runs the same load shape against a plain coder/websocket
	// echo server (over UDP: a plain UDP echo server) in its own process
	// and reports relay/baseline ratios.
	Baseline bool
	// Repeat runs the relay and the baseline this many times, alternating
	// which goes first (background load on a shared machine then hits both
	// alike); the result holds the medians and every run.
	Repeat int
	// SkipRelay runs only the baseline (for calibrating the echo server).
	SkipRelay bool

	// Forwarded switches to the forwarding mode: two relay
	// children form one multi-machine app (relay.Options.MultiMachine);
	// every room lives on the first (the holder), hosts connect to it
	// directly, and clients connect without a session hint to the second
	// (the edge), which forwards them over its mesh link to the holder.
	// With Baseline the same shape runs direct (clients connect to the
	// holder too) in place of the echo server, so the ratios read
	// forwarded/direct.
	Forwarded bool

	// Idle > 0 switches to the idle mode: open Idle authenticated
	// connections in rooms of one host and Clients clients, hold them for
	// Duration, and report the server's RSS per connection. No traffic.
	Idle int

	// Soak > 0 switches to the connection soak (soak.go): Rounds rounds,
	// each opening Soak connections to a relay child at its production
	// limits (but for SoakTimeout) and abandoning them; it reports the
	// relay's goroutines and open files after every round.
	Soak   int
	Rounds int // connection soak: rounds (default DefaultRounds)
	// SoakTimeout is the soak's relay child's authentication and header
	// timeouts (default DefaultSoakTimeout, the relay's own defaults).
	SoakTimeout time.Duration

	// BalancerLoad > 0 switches to the balancer mode: this many workers
	// each allocate a new room and join it, over and over (closed loop),
	// against a balancer child with a relay child; it reports pairs per
	// second, their latency and the balancer process's CPU. With
	// Baseline the same load also runs against the floor, a minimal
	// net/http server answering the same requests through the same relay
	// child (KindBalancerFloor); Repeat runs each that many times,
	// alternating which goes first.
	BalancerLoad int
	// WatchEvents, in the balancer mode, keeps a GET /v1/events stream
	// open on the balancer (not the floor) for every measured run and
	// reads it, as an operator's dashboard does.
	WatchEvents bool
	// CPUProfile is a path prefix: each server child writes its CPU
	// profile (runtime/pprof) over its whole life to PREFIX-<kind>.pprof
	// (balancer, relay, balancer-floor in the balancer mode; relay, and
	// echo or udp-echo with a baseline, in a traffic run).
	CPUProfile string

	// BalancerURL, when set, is an existing balancer to allocate and join
	// rooms through; no relay process is started and the server's CPU and
	// memory are measured only when ServerPID names its process.
	BalancerURL string
	Region      string // allocation region with BalancerURL ("" = any)
	ServerPID   int    // process to measure with BalancerURL (0 = none)

	// Secret is the shared secret of the in-process balancer and the relay
	// child ("" = "PURRNET").
	Secret string

	// Executable and ServerArgs start the server children: the child is
	// Executable ServerArgs... with ServerEnv set. Default: os.Executable()
	// with DefaultServerArgs, i.e. `purrctl bench server`.
	Executable string
	ServerArgs []string

	SetupTimeout time.Duration // bounds connecting everything (default 60 s)
	MaxMessages  int64         // total sends per run, a hard stop (default 2e8)
	DialParallel int           // connections dialled at once (default 64)

	Logger *slog.Logger // progress; nil = discard
}

// DefaultServerArgs are the arguments after the executable that run a
// server child: the hidden `purrctl bench server` command.
var DefaultServerArgs = []string{"bench", "server"}

func (o Options) withDefaults() (Options, error) {
	if o.Rooms == 0 {
		o.Rooms = DefaultRooms
	}
	if o.Clients == 0 {
		o.Clients = DefaultClients
	}
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.Mode == "" {
		o.Mode = FanIn
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Warmup == 0 {
		o.Warmup = DefaultWarmup
	}
	if o.Repeat <= 0 || o.Idle > 0 || o.Soak > 0 {
		o.Repeat = 1
	}
	if o.SetupTimeout <= 0 {
		o.SetupTimeout = DefaultSetupTimeout
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = DefaultMaxMessages
	}
	if o.DialParallel <= 0 {
		o.DialParallel = DefaultDialParallel
	}
	if o.Secret == "" {
		o.Secret = "PURRNET"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := o.checkTransport(); err != nil {
		return o, err
	}
	switch {
	case o.Rooms < 1 || o.Clients < 1:
		return o, fmt.Errorf("%w: rooms and clients must be at least 1", ErrInvalidOptions)
	case o.Size < MinSize || o.Size > MaxSize:
		return o, fmt.Errorf("%w: size must be %d to %d bytes", ErrInvalidOptions, MinSize, MaxSize)
	case o.Mode != FanIn && o.Mode != FanOut && o.Mode != Both:
		return o, fmt.Errorf("%w: mode %q (want fan-in, fan-out or both)", ErrInvalidOptions, o.Mode)
	case o.Repeat > 100:
		return o, fmt.Errorf("%w: repeat at most 100 times", ErrInvalidOptions)
	case o.Rate < 0 || o.Window < 1:
		return o, fmt.Errorf("%w: rate must be >= 0 and window >= 1", ErrInvalidOptions)
	case o.Duration < 0 || o.Warmup < 0:
		return o, fmt.Errorf("%w: negative duration", ErrInvalidOptions)
	case o.Idle < 0 || o.Idle > MaxConnections:
		return o, fmt.Errorf("%w: idle must be 0 to %d", ErrInvalidOptions, MaxConnections)
	case o.Idle == 0 && o.Rooms*(o.Clients+1) > MaxConnections:
		return o, fmt.Errorf("%w: more than %d connections", ErrInvalidOptions, MaxConnections)
	case o.BalancerLoad < 0 || o.BalancerLoad > 4096:
		return o, fmt.Errorf("%w: balancer-load must be 0 to 4096 workers", ErrInvalidOptions)
	case o.BalancerLoad > 0 && (o.Idle > 0 || o.SkipRelay || o.BalancerURL != ""):
		return o, fmt.Errorf("%w: the balancer mode runs alone (no idle, baseline-only or external balancer)", ErrInvalidOptions)
	case o.WatchEvents && o.BalancerLoad == 0:
		return o, fmt.Errorf("%w: watching events is the balancer mode's", ErrInvalidOptions)
	case o.CPUProfile != "" && o.BalancerLoad == 0 && (o.Idle > 0 || o.Soak > 0 || o.Forwarded || o.Repeat > 1):
		return o, fmt.Errorf("%w: CPU profiles are for one balancer-mode or traffic run (no idle, soak, forwarding or repeat)", ErrInvalidOptions)
	case o.SkipRelay && !o.Baseline:
		return o, fmt.Errorf("%w: nothing to run without the relay and the baseline", ErrInvalidOptions)
	case o.Forwarded && (o.Idle > 0 || o.BalancerLoad > 0 || o.BalancerURL != "" || o.SkipRelay):
		return o, fmt.Errorf("%w: the forwarding mode runs traffic against its own relays (no idle, balancer mode, external balancer or baseline-only)", ErrInvalidOptions)
	case o.Soak < 0 || o.Soak > MaxSoakConnections || o.Rounds < 0 || o.Rounds > 100 || o.SoakTimeout < 0:
		return o, fmt.Errorf("%w: soak must be 0 to %d connections, rounds 0 to 100", ErrInvalidOptions, MaxSoakConnections)
	case o.Soak > 0 && (o.Idle > 0 || o.BalancerLoad > 0 || o.Baseline || o.Forwarded || o.BalancerURL != "" || o.Transport != client.TransportWebSocket):
		return o, fmt.Errorf("%w: the connection soak runs alone, over WebSocket, against its own relay", ErrInvalidOptions)
	case o.ServerPID != 0 && o.BalancerURL == "":
		return o, fmt.Errorf("%w: a server pid only goes with an external balancer", ErrInvalidOptions)
	}
	if o.Idle > 0 {
		o.Rooms = (o.Idle + o.Clients) / (o.Clients + 1)
	}
	if o.Soak > 0 {
		o.Rounds = cmp.Or(o.Rounds, DefaultRounds)
		o.SoakTimeout = cmp.Or(o.SoakTimeout, DefaultSoakTimeout)
	}
	return o, nil
}

// checkTransport validates Transport and Delivery and sets method.
func (o *Options) checkTransport() error {
	udp := o.Transport.UDP()
	switch {
	case o.Transport != client.TransportWebSocket && !udp:
		return fmt.Errorf("%w: transport %d (want ws or udp)", ErrInvalidOptions, o.Transport)
	case !udp && o.Delivery != "":
		return fmt.Errorf("%w: delivery methods are UDP's (WebSocket is reliable and ordered)", ErrInvalidOptions)
	case !udp && o.RelayFlush != 0:
		return fmt.Errorf("%w: the relay's flush wait is UDP's", ErrInvalidOptions)
	case o.RelayFlush < 0 || o.RelayFlush%time.Millisecond != 0:
		return fmt.Errorf("%w: the relay's flush wait must be whole milliseconds, 0 or more", ErrInvalidOptions)
	case !udp:
		o.method = wire.ReliableOrdered
		return nil
	}
	if o.Delivery == "" {
		o.Delivery = DefaultUDPDelivery
	}
	if o.PeerFlush == 0 {
		o.PeerFlush = DefaultPeerFlush
	}
	m, ok := o.Delivery.method()
	o.method = m
	switch limit := maxUnfragmented(m); {
	case !ok:
		return fmt.Errorf("%w: delivery %q (want ro, ru, seq, rs or unrel)", ErrInvalidOptions, o.Delivery)
	case o.Size > MaxUDPSize:
		return fmt.Errorf("%w: size over UDP must be at most %d bytes (the baseline sends a message as one datagram)", ErrInvalidOptions, MaxUDPSize)
	case limit > 0 && o.Size > limit:
		return fmt.Errorf("%w: %s carries at most %d payload bytes in one LiteNetLib packet (only ro and ru fragment)", ErrInvalidOptions, o.Delivery, limit)
	case o.Forwarded || o.BalancerLoad > 0:
		return fmt.Errorf("%w: the forwarding and balancer modes run over WebSocket only", ErrInvalidOptions)
	case o.Idle > 0 && o.Baseline:
		return fmt.Errorf("%w: no idle baseline over UDP (a UDP echo server keeps nothing per peer)", ErrInvalidOptions)
	case o.connections() > MaxUDPConnections:
		return fmt.Errorf("%w: more than %d UDP connections", ErrInvalidOptions, MaxUDPConnections)
	}
	return nil
}

// profile is the CPU profile path of a child of kind ("" without
// CPUProfile).
func (o Options) profile(kind string) string {
	if o.CPUProfile == "" {
		return ""
	}
	return o.CPUProfile + "-" + kind + ".pprof"
}

// connections is the number of connections (or UDP sockets) of one side.
func (o Options) connections() int {
	if o.Idle > 0 {
		return o.Idle
	}
	return o.Rooms * (o.Clients + 1)
}

// clientsIn returns the clients of room i (the last idle room may be
// smaller so that the total is exactly Idle).
func (o Options) clientsIn(i int) int {
	if o.Idle == 0 {
		return o.Clients
	}
	per := o.Clients + 1
	left := o.Idle - i*per
	return max(0, min(per, left)-1)
}
