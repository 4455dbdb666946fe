package core

import (
	"cmp"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/wire"
)

// Notifier is told about room changes; the registrar implements it (a nop
// when there is no balancer). Both calls must be quick and never block:
// they run on connection readers, possibly under room.mu.
type Notifier interface {
	RoomChanged(r *Room)
	RoomRemoved(rem wire.Removal)
}

type nopNotifier struct{}

func (nopNotifier) RoomChanged(*Room) {}

func (nopNotifier) RoomRemoved(wire.Removal) {}

// Core is the routing core of one relay (see the package doc).
type Core struct {
	clock        clock.Clock   // static
	log          *slog.Logger  // static
	m            *metrics      // static
	notify       Notifier      // set once (SetNotifier) before any room; a nop until then
	emptyTimeout time.Duration // static: a room empty this long is removed
	hostWait     time.Duration // static: a room whose host has not connected this long after its allocation is removed
	// unhosted counts the rooms released for that (atomic; the relay's
	// heartbeat reports it to the balancer's /v1/stats).
	unhosted    atomic.Uint64
	slowTimeout time.Duration // static: a receiver above the soft queue bound this long is closed (core tests set it directly)
	// activationLease and grantLifetime are host migration's lease and
	// grant lifetime (migration.go); static after construction.
	activationLease time.Duration
	grantLifetime   time.Duration
	// maxRooms and maxConns bound the rooms and connections past which a
	// new room is relay_full (Config.MaxRooms, Config.MaxConns; 0 conns:
	// no bound). Static after construction.
	maxRooms int
	maxConns int

	nextID   atomic.Uint32  // the last connection id handed out
	rooms    roomTable      // live rooms by name; each shard under its own lock
	pipes    connTable      // pipe peers by id
	conns    connTable      // every open connection by id
	draining atomic.Bool    // SetDraining was called: no new room
	retiring atomic.Bool    // SetRetiring was called (a deploy retired the relay): no new room
	stopping atomic.Bool    // CloseAll(ReasonShutdown) has begun: host-left kicks say 1012 too
	idle     chan struct{}  // static, cap 1: signalled when the last connection leaves
	aborts   sync.WaitGroup // the goroutines transports started through Go
	// refused counts the room phase transitions refused (phase.go), a bug
	// every one; lastRefused is the last of them.
	refused     atomic.Int64
	lastRefused atomic.Pointer[phaseRefusal]
	// nat introduces two peers of a room to each other for a direct
	// connection; nil without a transport that can. Set once (SetNAT)
	// before any connection.
	nat NAT
}

// NAT is a transport that can introduce two of its peers to each other
// (NAT punch-through: the UDP transport): whether the
// peer behind a transport can punch (a peer of this machine, not one
// forwarded here over a link), and a token to expect from two of them.
type NAT interface {
	CanPunch(t Transport) bool
	Expect(token string, host, client Transport)
}

// Defaults of a Config's zero values.
const (
	DefaultEmptyRoomTimeout    = 300 * time.Second
	DefaultHostConnectTimeout  = 60 * time.Second
	DefaultSlowReceiverTimeout = 2 * time.Second
	DefaultActivationLease     = 60 * time.Second // MIGRATION_HOST_ACTIVATION_TIMEOUT_SECONDS
	DefaultGrantLifetime       = 30 * time.Second // MIGRATION_GRANT_TIMEOUT_SECONDS
	DefaultMaxRooms            = 10000
)

// Config configures a Core; zero durations and room bounds take the
// defaults.
type Config struct {
	Clock   clock.Clock           // nil: the real clock
	Log     *slog.Logger          // nil: discard
	Metrics prometheus.Registerer // where the core's metrics go; nil: a registry of its own

	EmptyRoomTimeout    time.Duration // a room empty this long is removed
	HostConnectTimeout  time.Duration // a room whose host has not connected this long after its allocation is removed
	SlowReceiverTimeout time.Duration // a receiver above the soft queue bound this long is closed
	ActivationLease     time.Duration // host migration's activation lease
	GrantLifetime       time.Duration // a live host's grant's life
	MaxRooms            int           // rooms held at most (a new one past it is relay_full)
	MaxConns            int           // connections past which a new room is relay_full; 0: no bound
}

// New is a core with no room and no connection. It registers the
// core's metrics.
func New(cfg Config) (*Core, error) {
	c := &Core{
		clock:        clock.OrReal(cfg.Clock),
		log:          cfg.Log,
		notify:       nopNotifier{},
		emptyTimeout: cmp.Or(cfg.EmptyRoomTimeout, DefaultEmptyRoomTimeout),
		hostWait:     cmp.Or(cfg.HostConnectTimeout, DefaultHostConnectTimeout),
		slowTimeout:  cmp.Or(cfg.SlowReceiverTimeout, DefaultSlowReceiverTimeout),
		idle:         make(chan struct{}, 1),

		activationLease: cmp.Or(cfg.ActivationLease, DefaultActivationLease),
		grantLifetime:   cmp.Or(cfg.GrantLifetime, DefaultGrantLifetime),
		maxRooms:        cmp.Or(cfg.MaxRooms, DefaultMaxRooms),
		maxConns:        cfg.MaxConns,
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	var err error
	c.m, err = newMetrics(reg, func() float64 { return float64(c.conns.n.Load()) }, func() float64 { return float64(c.rooms.n.Load()) })
	if err != nil {
		return nil, err
	}
	c.rooms.init(roomShard, lockrank.RoomTable)
	c.pipes.init(connShard, lockrank.ConnTable)
	c.conns.init(connShard, lockrank.ConnTable)
	return c, nil
}

// NewConn registers a new connection with a fresh id. ids are positive as
// a C# int (PurrNet reads them signed), unique within the process and
// shared by every transport. A nil t is a conn with no transport (tests).
func (c *Core) NewConn(t Transport) *Conn {
	cn := c.MakeConn(t)
	c.Publish(cn)
	return cn
}

// MakeConn is newConn without the publishing: a transport whose callbacks
// need the conn binds it first, then publishes it.
func (c *Core) MakeConn(t Transport) *Conn {
	var id uint32
	for id == 0 {
		id = c.nextID.Add(1) & 0x7fffffff
	}
	cn := c.bareConn(t)
	cn.id = wire.ConnID(id)
	return cn
}

// Publish puts a conn made by makeConn in the connection table.
func (c *Core) Publish(cn *Conn) { c.conns.add(cn.id, cn) }

// NewLink returns the upstream queue of a forwarded connection (ForwardTo):
// a conn that is in no table and counts in no connection metric.
func (c *Core) NewLink(t Transport) *Conn {
	cn := c.bareConn(t)
	cn.link = true
	return cn
}

// bareConn is a conn of transport t (none: nil) without an id, with the
// transport's direct write when it has one (Conn.Send).
func (c *Core) bareConn(t Transport) *Conn {
	if t == nil {
		t = nopTransport{}
	}
	cn := &Conn{core: c, t: t, mu: lockrank.Mutex{Class: lockrank.Conn}}
	if d, ok := t.(interface{ DirectWriter() DirectWriter }); ok {
		if cn.dw = d.DirectWriter(); cn.dw != nil {
			cn.dwMax = cn.dw.MaxDirect()
		}
	}
	return cn
}

// phaseRefusal is a refused room phase transition.
type phaseRefusal struct {
	room string
	err  error
}

// refusedPhase records a transition the room's phase refused: a bug in
// the core, logged and counted (ConsistencyCheck reports it).
func (c *Core) refusedPhase(r *Room, err error) {
	c.refused.Add(1)
	c.lastRefused.Store(&phaseRefusal{room: r.name, err: err})
	c.log.Error("room phase transition refused", "room", r.name, "err", err)
}

// refusedPhases is how many transitions were refused, and the last.
func (c *Core) refusedPhases() (int64, error) {
	n := c.refused.Load()
	if n == 0 {
		return 0, nil
	}
	last := c.lastRefused.Load()
	return n, fmt.Errorf("room %q: %w", last.room, last.err)
}

func (c *Core) Go(abort func()) {
	c.aborts.Go(abort)
}
