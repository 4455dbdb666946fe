package core

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/internal/randid"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// notifier is told about room changes; the registrar implements it (a nop
// when there is no balancer). Both calls must be quick and never block:
// they run on connection readers, possibly under room.mu.
type Notifier interface {
	RoomChanged(r *Room)
	RoomRemoved(rem wire.Removal)
}

type nopNotifier struct{}

func (nopNotifier) RoomChanged(*Room)        {}
func (nopNotifier) RoomRemoved(wire.Removal) {}

// core is the transport-agnostic routing core. Transports create conns
// with newConn, feed every received message to handle (from the conn's one
// reader goroutine), and call leave once when the conn ends.
//
// Lock order: roomTable shard -> room.mu -> conn.mu, and room.mu ->
// registrar.mu. No lock is held across I/O.
type Core struct {
	clock        clock.Clock   // static
	log          *slog.Logger  // static
	m            *metrics      // static
	notify       Notifier      // static after construction
	emptyTimeout time.Duration // static: a room empty this long is removed
	slowTimeout  time.Duration // static: a receiver above the soft queue bound this long is closed (core tests set it directly)
	// activationLease and grantLifetime are host migration's lease and
	// grant lifetime (migration.go); static after construction.
	activationLease time.Duration
	grantLifetime   time.Duration
	// maxRooms and maxConns bound the rooms and connections past which a
	// new room is relay_full: the lower of Options.MaxRooms and
	// Options.Capacity.MaxRooms, and Options.Capacity.MaxConnections (0:
	// no bound). Static after construction.
	maxRooms int
	maxConns int

	nextID   atomic.Uint32
	rooms    roomTable
	pipes    connTable // pipe peers by id
	conns    connTable // every open conn
	draining atomic.Bool
	retiring atomic.Bool   // a deploy retired this relay (SetRetiring): no new room
	stopping atomic.Bool   // closeAll(reasonShutdown) has begun: host-left kicks say 1012 too
	idle     chan struct{} // cap 1: signalled when the last conn leaves
	aborts   sync.WaitGroup
	// refused counts the room phase transitions refused (phase.go), a bug
	// every one; lastRefused is the last of them.
	refused     atomic.Int64
	lastRefused atomic.Pointer[phaseRefusal]
	// nat introduces two peers of a room to each other for a direct
	// connection; nil without a transport that can. Static after
	// construction.
	nat NAT
}

// natBroker is a transport that can introduce two of its peers to each
// other (NAT punch-through: the UDP transport, udp_nat.go): whether the
// peer behind a transport can punch (a peer of this machine, not one
// forwarded here over a link), and a token to expect from two of them.
type NAT interface {
	CanPunch(t Transport) bool
	Expect(token string, host, client Transport)
}

// Defaults of a Config's zero values.
const (
	DefaultEmptyRoomTimeout    = 300 * time.Second
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

// newConn registers a new connection with a fresh id. ids are positive as
// a C# int (PurrNet reads them signed), unique within the process and
// shared by every transport. A nil t is a conn with no transport (tests).
func (c *Core) NewConn(t Transport) *Conn {
	cn := c.MakeConn(t)
	c.Publish(cn)
	return cn
}

// makeConn is newConn without the publishing: a transport whose callbacks
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

// publish puts a conn made by makeConn in the connection table.
func (c *Core) Publish(cn *Conn) { c.conns.add(cn.id, cn) }

// newLink returns the upstream queue of a forwarded connection (forward.go):
// a conn that is in no table and counts in no connection metric.
func (c *Core) NewLink(t Transport) *Conn {
	cn := c.bareConn(t)
	cn.link = true
	return cn
}

// bareConn is a conn of transport t (none: nil) without an id, with the
// transport's direct write when it has one (conn.send).
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

// handle routes one message read from cn. It takes ownership of b, whose
// frame starts headroom bytes into its buffer, in PurrNet's WebSocket
// framing, and whose method is the delivery method it came with (a UDP
// transport takes it out of its own framing first, wire.UDPMethod; a
// forwarded peer's messages go to the holder as they came). Only cn's
// reader calls it.
func (c *Core) Handle(cn *Conn, b *buf.Buf) {
	if cn.closing.Load() {
		buf.Put(b)
		c.m.drop(DropSenderClosed)
		return
	}
	switch cn.role {
	case RoleNone:
		c.auth(cn, b)
	case RoleClient:
		c.fromClient(cn, b)
	case RoleHost:
		c.fromHost(cn, b)
	case RolePipe:
		c.fromPipe(cn, b)
	case RoleForwarded:
		cn.up.Send(b, DirMeshOut, cn.direct).Write()
	}
}

// maxClientPayload is the largest client payload forwarded to a host: its
// [2][sender:4][payload] frame must fit one 65,535-byte message, the most
// PurrNet's host socket (SimpleWebTransport) accepts.
const maxClientPayload = wire.MaxMessageSize - 5

// fromClient forwards a client's payload to its host as [2][sender][payload],
// writing the header into the buffer's headroom (no copy), with the
// client's delivery method. The enqueue happens under the room lock, so a
// client that the host kicked (or whose host left) can never slip a packet
// in after its disconnect notice.
//
// PurrLay drops a client packet of one byte or less as it was sent, its
// framing included (a UDP client's [method][x] carries one byte to the
// host).
func (c *Core) fromClient(cn *Conn, b *buf.Buf) {
	if b.Len()+b.Cut <= 1 {
		buf.Put(b)
		c.m.drop(DropSmallClient)
		return
	}
	if b.Len() > maxClientPayload {
		// Legal from the client, but the host's socket could not take the
		// framed packet: PurrLay's SendOne drops it too.
		buf.Put(b)
		c.m.drop(DropTooLargeForHost)
		return
	}
	b.Off -= 5
	b.B[b.Off] = wire.ToHostData
	binary.LittleEndian.PutUint32(b.B[b.Off+1:], uint32(cn.id))
	r := cn.room
	r.mu.Lock()
	h, gone := r.host, cn.closing.Load()
	if h != nil && !gone && !cn.isolated {
		w := h.Send(b, DirToHost, cn.direct)
		r.mu.Unlock()
		w.Write()
		return
	}
	isolated := cn.isolated
	r.mu.Unlock()
	buf.Put(b)
	switch {
	case gone:
		c.m.drop(DropSenderClosed)
	case isolated:
		c.m.drop(DropIsolated)
	default:
		c.m.drop(DropNoHost)
	}
}

// fromHost handles keepalive, SEND_ONE and KICK. Malformed packets are
// dropped and counted; the connection stays (PurrLay does the same).
func (c *Core) fromHost(cn *Conn, b *buf.Buf) {
	p, err := wire.ParseHostPacket(b.Frame())
	if err != nil {
		buf.Put(b)
		c.DropMalformed(err)
		return
	}
	switch {
	case p.Type == wire.HostKeepAlive:
		buf.Put(b)
		return
	case p.Type == wire.HostSendOne && len(p.Payload) == 0:
		buf.Put(b)
		c.m.drop(DropEmptyPayload)
		return
	}
	r := cn.room
	r.mu.Lock()
	if r.host != cn || cn.closing.Load() {
		// Read just before a claim fenced this host: nothing of it reaches
		// the new generation.
		r.mu.Unlock()
		buf.Put(b)
		c.m.drop(DropSenderClosed)
		return
	}
	t := r.clients[p.Target]
	if t == nil {
		r.mu.Unlock()
		buf.Put(b)
		c.m.drop(DropBadTarget)
		return
	}
	if p.Type == wire.HostSendOne {
		b.Off += 5
		w := t.Send(b, DirToClient, cn.direct)
		r.mu.Unlock()
		w.Write()
		return
	}
	// Kick: the client leaves the room now, as PurrLay does, so the host
	// hears of it at once rather than after the close handshake.
	buf.Put(b)
	c.removeClientLocked(r, t)
	t.Close(ReasonKicked)
	r.mu.Unlock()
}

// removeClientLocked takes cl out of r, tells the host and records the
// count change. The caller holds r.mu.
func (c *Core) removeClientLocked(r *Room, cl *Conn) {
	delete(r.clients, cl.id)
	if r.host != nil {
		f := buf.Get(5)
		f.End = len(wire.AppendDisconnected(f.B[:0], cl.id))
		r.host.Enqueue(f, DirControl)
	}
	r.changedLocked(c)
}

// fromPipe forwards [target][data] as [sender][data], rewriting the id in
// place, with the sender's delivery method.
func (c *Core) fromPipe(cn *Conn, b *buf.Buf) {
	target, data, err := wire.ParsePipe(b.Frame())
	if err != nil {
		buf.Put(b)
		c.m.drop(DropTruncated)
		return
	}
	if len(data) == 0 {
		buf.Put(b)
		c.m.drop(DropEmptyPayload)
		return
	}
	t := c.pipes.get(target)
	if t == nil {
		buf.Put(b)
		c.m.drop(DropBadTarget)
		return
	}
	binary.LittleEndian.PutUint32(b.B[b.Off:], uint32(cn.id))
	t.Send(b, DirPipe, cn.direct).Write()
}

// dropMalformed counts a packet a parser of wire refused, by its error.
func (c *Core) DropMalformed(err error) {
	switch err {
	case wire.ErrEmptyPacket:
		c.m.drop(DropEmpty)
	case wire.ErrTruncatedPacket:
		c.m.drop(DropTruncated)
	case wire.ErrEmptyPayload:
		c.m.drop(DropEmptyPayload)
	case wire.ErrBadMethod:
		c.m.drop(DropBadMethod)
	default:
		c.m.drop(DropUnknown)
	}
}

// maxRoomClients bounds a room's clients so that the host's "clients
// connected" packet, which lists them all, fits one 65,535-byte message.
const maxRoomClients = (wire.MaxMessageSize - 1) / 4

// auth handles the first message of cn.
func (c *Core) auth(cn *Conn, b *buf.Buf) {
	a, err := wire.ParseAuth(b.Frame())
	buf.Put(b)
	if err != nil {
		c.authFail(cn)
		return
	}
	if a.Pipe {
		cn.role = RolePipe
		c.pipes.add(cn.id, cn)
		c.m.authOK.Inc()
		f := buf.Get(5)
		f.End = len(wire.AppendPipeAuthenticated(f.B[:0], cn.id))
		cn.Enqueue(f, DirControl)
		return
	}
	r := c.rooms.get(a.RoomName)
	if r == nil {
		c.authFail(cn)
		return
	}
	r.mu.Lock()
	if !r.liveLocked() || len(r.clients)+len(r.mig.isolated) >= maxRoomClients {
		r.mu.Unlock()
		c.authFail(cn)
		return
	}
	cn.nat = a.NAT
	switch {
	case wire.SecretEqual(a.ClientSecret, r.clientSecret):
		cn.role, cn.room = RoleClient, r
		if r.isolatingLocked() {
			// A migration lease: only the promoted player's listen-client
			// reaches the provisional host (migration.go).
			if !r.laneLocked(a) {
				r.isolateLocked(cn)
				cn.Enqueue(buf.Of(wire.Authenticated), DirControl)
				break
			}
			r.mig.lane = cn
		}
		r.clients[cn.id] = cn
		if r.host != nil {
			// NAT introduction first on both sides (PurrLay's order): the
			// host learns a punch is pending before the client's notice,
			// the client before [3], after which it reads only game data.
			c.introduceLocked(r, cn)
			f := buf.Get(5)
			f.End = len(wire.AppendConnected(f.B[:0], cn.id))
			r.host.Enqueue(f, DirControl)
		}
		cn.Enqueue(buf.Of(wire.Authenticated), DirControl)
	case wire.SecretEqual(a.ClientSecret, r.hostSecret) && r.hostMayConnectLocked():
		// The host credential is single-activation: spent by this socket.
		cn.role, cn.room = RoleHost, r
		r.hostArrivedLocked(cn)
		cn.Enqueue(buf.Of(wire.Authenticated), DirControl)
		if len(r.clients) > 0 {
			// A host that logs in after clients gets every id in one packet.
			ids := make([]wire.ConnID, 0, len(r.clients))
			for id := range r.clients {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			f := buf.Get(1 + 4*len(ids))
			f.End = len(wire.AppendConnected(f.B[:0], ids...))
			cn.Enqueue(f, DirControl)
		}
	default:
		// Wrong secret, a second host for the room, or a host credential
		// already spent (or expired with its lease).
		r.mu.Unlock()
		c.authFail(cn)
		return
	}
	r.changedLocked(c)
	r.mu.Unlock()
	c.m.authOK.Inc()
}

func (c *Core) authFail(cn *Conn) {
	c.m.authFailed.Inc()
	cn.Enqueue(buf.Of(wire.AuthFailed), DirControl)
	cn.Close(ReasonAuthFailed)
}

// leave removes cn from its room or the pipe table. The transport calls it
// exactly once, from cn's reader, when the connection ends.
func (c *Core) Leave(cn *Conn) {
	switch cn.role {
	case RolePipe:
		c.pipes.remove(cn.id, cn)
	case RoleClient:
		r := cn.room
		r.mu.Lock()
		switch {
		case r.clients[cn.id] == cn:
			if r.mig.lane == cn {
				r.mig.lane = nil
			}
			c.removeClientLocked(r, cn)
		case r.mig.isolated[cn.id] == cn:
			delete(r.mig.isolated, cn.id)
			cn.isolated = false
			r.changedLocked(c)
		}
		r.mu.Unlock()
	case RoleHost:
		c.hostLeft(cn)
	case RoleForwarded:
		// The holder sees the peer leave: the link closes normally.
		cn.up.Close(ReasonClientLeft)
	}
	if c.conns.remove(cn.id, cn) && c.conns.n.Load() == 0 {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// hostLeft disconnects every client of the host's room (the provisional
// host's too). A room that had clients stays, count 0 and vacant, so that
// one of them can claim it (host migration), and so does one whose
// provisional host left (its players, closed by the claim, come back to
// claim again); an active host leaving an otherwise empty room ends it.
func (c *Core) hostLeft(cn *Conn) {
	r := cn.room
	r.mu.Lock()
	if r.host != cn {
		r.mu.Unlock()
		return
	}
	kicked := r.takeClientsLocked(nil)
	var rem wire.Removal
	removed := len(kicked) == 0 && r.phaseLocked() == phase.Hosted
	if removed {
		r.host = nil
		rem = r.removeLocked()
	} else {
		r.hostGoneLocked() // vacant: published with the count change below
		r.changedLocked(c)
	}
	reason := ReasonHostLeft
	if c.stopping.Load() {
		reason = ReasonShutdown
	}
	// Closed under the lock: none of them can forward another packet.
	for _, cl := range kicked {
		cl.Close(reason)
	}
	r.mu.Unlock()
	if removed {
		c.dropRoom(r, rem)
	}
}

// dropRoom takes a room marked removed out of the table and queues its
// removal for the balancer.
func (c *Core) dropRoom(r *Room, rem wire.Removal) {
	c.rooms.remove(r.name, r)
	c.notify.RoomRemoved(rem)
	c.log.Debug("room removed", "room", r.name, "epoch", rem.Epoch, "revision", rem.Revision)
}

// expire removes rooms that have been empty for emptyTimeout.
func (c *Core) Expire() {
	now := c.clock.Now()
	for _, r := range c.rooms.all() {
		r.mu.Lock()
		if !r.liveLocked() || r.countLocked() > 0 || now.Sub(r.emptySince) < c.emptyTimeout {
			r.mu.Unlock()
			continue
		}
		rem := r.removeLocked()
		r.mu.Unlock()
		c.log.Info("empty room expired", "room", r.name)
		c.dropRoom(r, rem)
	}
}

// removeAll removes every room (final shutdown).
func (c *Core) RemoveAll() {
	for _, r := range c.rooms.all() {
		r.mu.Lock()
		if !r.liveLocked() {
			r.mu.Unlock()
			continue
		}
		rem := r.removeLocked()
		r.mu.Unlock()
		c.dropRoom(r, rem)
	}
}

// closeAll closes every open connection for reason.
func (c *Core) CloseAll(reason Reason) {
	if reason == ReasonShutdown {
		c.stopping.Store(true)
	}
	for _, cn := range c.conns.all() {
		cn.Close(reason)
	}
}

// allocation is the result of allocate.
type Allocation struct {
	HostSecret string
	Pub        wire.Publication
	Replayed   bool
}

// allocate creates room name for allocID, or replays the allocation that
// created it. A live room under another allocation id is ErrRoomTaken,
// unless room.takeoverLocked allows (vacant, nobody connected, its
// players' recovery window over): then the new allocation takes the name
// over, and the old incarnation is removed (its epoch goes to the
// unregister outbox). A room whose host has not connected yet stays
// reserved for its allocation. An empty allocID never matches,
// so it never replays. A draining relay still replays (the answer may have
// been lost) but creates nothing: it answers ErrDraining, after releasing
// a vacant empty room of that name, so that the balancer places the new
// incarnation on another relay instead of answering room_name_taken for
// the whole drain (PurrNet reuses a scene's room name on every Play).
func (c *Core) Allocate(name, allocID string) (Allocation, error) {
	mu, m := c.rooms.shard(name)
	mu.Lock()
	defer mu.Unlock()
	if r := m[name]; r != nil {
		r.mu.Lock()
		if r.liveLocked() {
			if allocID != "" && r.allocationID == allocID {
				// The allocation's own capability, as it was: after a claim
				// the current host credential is the promoted player's,
				// never the original allocator's to learn.
				defer r.mu.Unlock()
				return Allocation{HostSecret: r.allocSecret, Pub: r.publicationLocked(), Replayed: true}, nil
			}
			if !r.takeoverLocked(c.activationLease, c.takesNoRooms()) {
				r.mu.Unlock()
				return Allocation{}, wire.ErrRoomTaken
			}
			// Take the vacant room over, or, draining, just let it go so
			// that the balancer places the new incarnation elsewhere. The
			// shard lock is held, so the table is updated here rather
			// than through dropRoom.
			rem := r.removeLocked()
			r.mu.Unlock()
			c.notify.RoomRemoved(rem)
			if c.takesNoRooms() {
				c.log.Info("vacant room released for a new allocation elsewhere (draining or retiring)", "room", name, "old_epoch", rem.Epoch)
			} else {
				c.log.Info("vacant room taken over by a new allocation", "room", name, "old_epoch", rem.Epoch)
			}
		} else {
			r.mu.Unlock()
		}
		delete(m, name)
		c.rooms.n.Add(-1)
	}
	if c.draining.Load() {
		return Allocation{}, wire.ErrDraining
	}
	if c.retiring.Load() {
		return Allocation{}, wire.ErrRetiring
	}
	if c.rooms.n.Load() >= int64(c.maxRooms) {
		return Allocation{}, wire.ErrRelayFull
	}
	if c.maxConns > 0 && c.conns.n.Load() >= int64(c.maxConns) {
		return Allocation{}, errConnsFull
	}
	secret := randomHex(16)
	r := &Room{
		mu:           lockrank.Mutex{Class: lockrank.Room},
		name:         name,
		incarnation:  randomHex(12),
		epoch:        randomHex(16),
		revision:     1,
		hostSecret:   secret,
		allocSecret:  secret,
		clientSecret: randomHex(16),
		allocationID: allocID,
		core:         c,
		life:         phase.New(c.clock),
		clients:      make(map[wire.ConnID]*Conn),
		emptySince:   c.clock.Now(),
		mig:          migState{fence: randomHex(16)},
	}
	m[name] = r
	c.rooms.n.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	return Allocation{HostSecret: r.hostSecret, Pub: r.publicationLocked()}, nil
}

// takesNoRooms reports whether the relay creates no room: it drains or
// retires.
func (c *Core) takesNoRooms() bool { return c.draining.Load() || c.retiring.Load() }

// errConnsFull is relay_full for a relay at its connection capacity: the
// balancer skips it as it skips one at its room capacity.
var errConnsFull = wire.ErrRelayFull.WithMessage("this relay holds as many connections as it may take")

// randomHex returns n random bytes as lower-case hex.
func randomHex(n int) string { return randid.Hex(n) }

// introduceLocked starts a NAT introduction between r's host and a client
// that just joined when both asked for it ({"nat":true}) and the transport
// of both can introduce them (UDP peers of this machine): the same [6][token] to the host, then the client
// (docs/UDP.md, NAT punch flow). The token ends with the client's id (the
// host maps the direct peer to it) and carries 128 random bits (it is the
// host's accept key for the direct connection, so it must not be
// guessable). The peers stay relayed either way. The caller holds r.mu.
func (c *Core) introduceLocked(r *Room, cl *Conn) {
	h := r.host
	if c.nat == nil || !cl.nat || !h.nat || !c.nat.CanPunch(h.t) || !c.nat.CanPunch(cl.t) {
		return
	}
	token := fmt.Sprintf("%.8s_%s_%d", r.epoch, randomHex(16), cl.id)
	c.nat.Expect(token, h.t, cl.t)
	for _, to := range [...]*Conn{h, cl} {
		f := buf.Get(1 + len(token))
		f.End = copy(f.B[1:], token) + 1
		f.B[0] = wire.ToHostNATIntroduce
		to.Enqueue(f, DirControl)
	}
}
