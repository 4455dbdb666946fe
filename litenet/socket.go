package litenet

import (
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/lockrank"
)

// datagramReader reads batches of datagrams (recv_linux.go, recv_other.go).
type datagramReader interface {
	read() (int, error)
	datagram(i int) (netip.AddrPort, []byte, bool)
	// arrival is when the kernel received the i-th datagram (Unix ns; 0
	// without Config.Arrivals).
	arrival(i int) int64
}

// socket is one UDP socket of an Endpoint with its two goroutines: the
// reader (readLoop), which processes what arrives and then flushes when it
// can, and the flusher (flushLoop), which runs the timer wheel and flushes
// peers woken from elsewhere.
//
// Flushing (building and writing datagrams, running peers' timers, calling
// Handler.Flush) is done by whoever holds flushMu, the reader after each
// batch when it is free, else the flusher; so at low rates a datagram in
// is answered on the goroutine that read it, with no hand-off, and under
// load one flush serves many peers with one sendmmsg. With a FlushDelay
// the reader flushes nothing: woken peers wait, up to the delay after the
// first of them was woken, for the flusher, and what each was sent
// meanwhile goes merged (fewer datagrams: on loopback a datagram's cost is
// mostly the kernel's, per datagram).
type socket struct {
	e  *Endpoint    // static
	c  *net.UDPConn // static
	rd datagramReader
	// arrival is the kernel's arrival time of the datagram the reader is
	// handling (Unix ns, 0 without Config.Arrivals), handed to the peer it
	// delivers for (Peer.arrival). Owned by the reader.
	arrival int64
	rx      rx // owned by readLoop
	// v1: the socket speaks LiteNetLib 1.x (static): datagrams are
	// renumbered as they are read and written (version.go).
	v1 bool
	// scratch holds an answer to an unknown sender while it is renumbered
	// (owned by readLoop).
	scratch [32]byte

	flushMu lockrank.Mutex
	out     *outBatch // guarded by flushMu
	wheel   *wheel    // guarded by flushMu
	em      emitter   // guarded by flushMu
	due     []*Peer   // guarded by flushMu
	spare   []*Peer   // guarded by flushMu: the dirty list's spare array
	// held: peers waiting for company under the busy rule
	// (Config.BusyWait); heldNext the earliest end of their waits (0:
	// none). Guarded by flushMu.
	held     []*Peer
	heldNext int64

	dirtyMu lockrank.Mutex
	dirty   []*Peer // guarded by dirtyMu: peers woken since the last flush
	// dirtySince is when the dirty list last became non-empty (0: empty),
	// written under dirtyMu; wakeAt is when the flusher plans to wake
	// (math.MaxInt64: not before a poke), written by the flusher. Both
	// matter only with a FlushDelay: a peer woken first into an empty list
	// pokes the flusher only if the flusher would wake later than the
	// delay allows. Each side writes its own before it reads the other's.
	dirtySince atomic.Int64
	wakeAt     atomic.Int64

	// readerActive is set while the reader processes a batch: it flushes
	// afterwards, so waking a peer needs no poke meanwhile.
	readerActive atomic.Bool
	poke         chan struct{} // cap 1: wakes the flusher
	rate         tokenBucket   // owned by readLoop: answers to unknown senders
	// parked is set while the flusher waits with its timer armed: tests on
	// a fake clock advance it only then (the timer is relative to now).
	parked atomic.Bool

	sent, sendErrs atomic.Uint64
	// direct, directErrs: datagrams written outside the batch (writeRaw),
	// and those lost to errors.
	direct, directErrs atomic.Uint64
}

// gone is a peer that left or is to be forgotten during a flush; the
// Handler is told after flushMu is released.
type gone struct {
	p            *Peer
	left, forget bool
	why          Reason
}

// schedule puts a woken peer in the dirty list.
func (s *socket) schedule(p *Peer) {
	delay := int64(s.e.cfg.FlushDelay)
	var due int64
	s.dirtyMu.Lock()
	first := len(s.dirty) == 0
	s.dirty = append(s.dirty, p)
	if first && delay > 0 {
		due = max(s.e.now(), 1) + delay
		s.dirtySince.Store(due - delay)
	}
	s.dirtyMu.Unlock()
	switch {
	case delay == 0:
		if !s.readerActive.Load() {
			s.pokeFlusher()
		}
	case first && s.wakeAt.Load() > due:
		s.pokeFlusher()
	}
}

// sendFlush is a Send under Config.SendFlushes: p joins the dirty list
// and the sender flushes it when no flush is running; else whoever runs
// one (the reader after its batch, or the flusher, poked) does.
func (s *socket) sendFlush(p *Peer) {
	if !p.scheduled.Swap(true) {
		s.dirtyMu.Lock()
		s.dirty = append(s.dirty, p)
		s.dirtyMu.Unlock()
	}
	if s.readerActive.Load() {
		return // the reader flushes after its batch
	}
	if !s.flushMu.TryLock() {
		s.pokeFlusher()
		return
	}
	left := s.flushLocked(s.e.now(), nil)
	s.flushMu.Unlock()
	s.tell(left)
}

func (s *socket) pokeFlusher() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// readLoop is the socket's reader: read a batch, process every datagram,
// flush (or leave it to the flusher if it is busy).
func (s *socket) readLoop() {
	var left []gone
	for {
		n, err := s.rd.read()
		if err != nil {
			if s.e.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient error (an ICMP error reported on the socket)
		}
		now := s.e.now()
		stamped := s.e.cfg.Arrivals
		s.readerActive.Store(true)
		for i := range n {
			addr, b, ok := s.rd.datagram(i)
			if !ok {
				s.e.stats.malformed.Add(1)
				continue
			}
			if stamped { // else arrival stays 0: no call per datagram for the relay
				s.arrival = s.rd.arrival(i)
			}
			s.handle(addr, b, now)
		}
		s.readerActive.Store(false)
		if s.e.cfg.FlushDelay > 0 {
			continue // the flusher flushes, when the first woken peer's delay is up
		}
		if s.flushMu.TryLock() {
			left = s.flushLocked(now, left[:0])
			s.flushMu.Unlock()
			s.tell(left)
		} else {
			s.pokeFlusher()
		}
	}
}

// flushLoop is the socket's flusher: it sleeps until the wheel's earliest
// deadline or a poke, and flushes.
func (s *socket) flushLoop() {
	t := s.e.clk.NewTimer(s.e.cfg.Tick)
	defer t.Stop()
	var left []gone
	for {
		s.parked.Store(true)
		select {
		case <-s.e.done:
			return
		case <-t.C():
		case <-s.poke:
		}
		s.parked.Store(false)
		s.flushMu.Lock()
		now := s.e.now()
		left = s.flushLocked(now, left[:0])
		wake := int64(math.MaxInt64)
		if next := s.wheel.next(); next != 0 {
			wake = max(next, now+int64(s.e.cfg.Tick))
		}
		if s.heldNext != 0 {
			wake = min(wake, max(s.heldNext, now))
		}
		s.wheel.sleepUntil = wake
		if delay := int64(s.e.cfg.FlushDelay); delay > 0 {
			s.wakeAt.Store(wake)
			if since := s.dirtySince.Load(); since != 0 {
				wake = min(wake, max(since+delay, now))
				s.wheel.sleepUntil = wake
				s.wakeAt.Store(wake)
			}
		}
		s.flushMu.Unlock()
		s.tell(left)
		t.Stop()
		if wake != math.MaxInt64 {
			// From the time now, not the flush's: a long flush (or
			// Disconnected calls) does not push the next wake-up back.
			t.Reset(time.Duration(max(wake-s.e.now(), 0)))
		}
	}
}

// flushLocked flushes the peers whose timers are due and the woken ones
// (with a FlushDelay, once the first of them has waited it), then writes
// the batch. It returns the peers that left (appended to dst).
func (s *socket) flushLocked(now int64, dst []gone) []gone {
	s.due = s.wheel.due(now, s.due[:0])
	for i, p := range s.due {
		dst = s.flushPeer(p, now, dst)
		s.due[i] = nil
	}
	delay := int64(s.e.cfg.FlushDelay)
	busy := int64(s.e.cfg.BusyWait)
	if delay > 0 {
		busy = 0
	}
	if len(s.held) > 0 {
		dst = s.releaseHeld(now, dst)
	}
	for round := range 8 {
		s.dirtyMu.Lock()
		if since := s.dirtySince.Load(); round == 0 && delay > 0 && since != 0 && now < since+delay {
			s.dirtyMu.Unlock()
			break // not yet: more may be sent to them meanwhile (peers woken by this flush go at once)
		}
		list := s.dirty
		s.dirty, s.spare = s.spare[:0], nil
		s.dirtySince.Store(0)
		s.dirtyMu.Unlock()
		if len(list) == 0 {
			s.spare = list
			break
		}
		for i, p := range list {
			p.scheduled.Store(false)
			list[i] = nil
			if busy > 0 && s.hold(p, now, busy) {
				continue
			}
			dst = s.flushPeer(p, now, dst)
		}
		s.spare = list[:0]
	}
	s.out.write()
	s.sent.Store(s.out.sent)
	s.sendErrs.Store(s.out.errs)
	s.dirtyMu.Lock()
	more := len(s.dirty) > 0
	s.dirtyMu.Unlock()
	if more && delay == 0 {
		s.pokeFlusher() // with a delay, the flusher plans its wake-up by dirtySince
	}
	return dst
}

// hold applies the busy rule to a woken peer: it reports whether p waits
// for company instead of being flushed now. A peer waits when the flushes
// that found it woken came less than wait apart on average (the average
// starts at 8 waits, so it takes about eight quick wakes in a row), up to
// wait from the first of them; one already waiting goes once its wait is
// up. A peer that is not plainly connected (closing, going) never waits.
func (s *socket) hold(p *Peer, now, wait int64) bool {
	if p.lastWoken != 0 {
		if p.gap == 0 {
			p.gap = 8 * wait
		}
		p.gap += (max(now-p.lastWoken, 1) - p.gap) / 4
	}
	p.lastWoken = now
	if p.heldUntil != 0 {
		return now < p.heldUntil
	}
	if p.gap == 0 || p.gap >= wait {
		return false
	}
	p.mu.Lock()
	up := p.state == stateConnected
	p.mu.Unlock()
	if !up {
		return false
	}
	p.heldUntil = now + wait
	if !p.held {
		p.held = true
		s.held = append(s.held, p)
	}
	if s.heldNext == 0 || p.heldUntil < s.heldNext {
		s.heldNext = p.heldUntil
	}
	if p.heldUntil < s.wheel.sleepUntil {
		s.wheel.sleepUntil = p.heldUntil
		s.pokeFlusher() // it sleeps past the end of this wait
	}
	return true
}

// releaseHeld flushes the held peers whose wait is up, drops those
// flushed meanwhile, and sets heldNext by the rest.
func (s *socket) releaseHeld(now int64, dst []gone) []gone {
	kept := s.held[:0]
	next := int64(0)
	for _, p := range s.held {
		switch {
		case p.heldUntil == 0: // flushed by its timers meanwhile
			p.held = false
		case now >= p.heldUntil:
			p.held = false
			dst = s.flushPeer(p, now, dst)
		default:
			kept = append(kept, p)
			if next == 0 || p.heldUntil < next {
				next = p.heldUntil
			}
		}
	}
	clear(s.held[len(kept):])
	s.held, s.heldNext = kept, next
	return dst
}

// flushPeer runs Handler.Flush when asked, then emits what p owes.
func (s *socket) flushPeer(p *Peer, now int64, dst []gone) []gone {
	p.heldUntil = 0
	if p.appWake.Swap(false) && !p.refused.Load() {
		p.inFlush.Store(true)
		more := s.e.h.Flush(p)
		p.inFlush.Store(false)
		p.wantMore.Store(more)
	}
	if s.out.free() < peerBudget {
		s.out.write()
	}
	p.mu.Lock()
	s.em.start(s.out, p.addr, p.connNum, s.v1)
	given := p.creditLocked()
	s.em.credit = given
	next, left, forget := p.emit(&s.em, now)
	p.spentLocked(given, &s.em)
	why := p.reason
	// The handler stopped at a backlog limit and everything it queued has
	// gone out (unreliable and sequenced packets need no ack to leave the
	// queue): ask it for more, in this same flush round.
	refill := p.wantMore.Load() && !left && !forget && p.backlogLocked() == 0
	p.mu.Unlock()
	s.em.close()
	if forget {
		next = 0
	}
	if s.wheel.set(p, next) {
		s.pokeFlusher() // earlier than the flusher planned to wake
	}
	if left || forget {
		dst = append(dst, gone{p: p, left: left, forget: forget, why: why})
	}
	if refill {
		p.Wake()
	}
	return dst
}

// tell calls Handler.Disconnected for the peers that left and drops the
// forgotten ones from the tables.
func (s *socket) tell(left []gone) {
	for i, g := range left {
		if g.left {
			s.e.notify(g.p, g.why)
		}
		if g.forget {
			s.e.forget(g.p)
		}
		left[i] = gone{}
	}
}

// handle processes one datagram.
func (s *socket) handle(addr netip.AddrPort, b []byte, now int64) {
	e := s.e
	e.stats.datagrams.Add(1)
	e.stats.bytes.Add(uint64(len(b)))
	if s.v1 {
		fromV1(b)
	}
	if !verify(b) {
		e.stats.malformed.Add(1)
		return
	}
	switch Property(b[0] & 0x1f) {
	case PropConnectRequest:
		s.connectRequest(addr, b, now)
		return
	case PropNatMessage:
		if !s.v1 { // 1.x serves no NAT introduction, as PurrLay's 1.x listener
			s.nat(addr, b)
		}
		return
	case PropBroadcast, PropUnconnectedMessage:
		return
	}
	p := e.peers.get(addr)
	if p == nil {
		s.unknown(addr, b, now)
		return
	}
	s.receive(p, b, now)
}

var (
	shutdownOk       = []byte{byte(PropShutdownOk)}
	peerNotFound     = []byte{byte(PropPeerNotFound)}
	peerNotFoundHard = []byte{byte(PropPeerNotFound), 1}
	invalidProtocol  = []byte{byte(PropInvalidProtocol)}
)

// receive processes a datagram of a known peer and delivers its messages.
func (s *socket) receive(p *Peer, b []byte, now int64) {
	e, rx := s.e, &s.rx
	p.rmu.Lock()
	p.mu.Lock()
	rx.reset(p, now)
	p.countInLocked(len(b))
	if p.starved {
		rx.flush = true // more credit: what was held back may go now
	}
	p.receive(rx, b)
	if rx.gone != ReasonNone && p.state != stateGone {
		p.shutdownLocked(now, rx.gone) // a message too big: Disconnect follows
	}
	forget := p.state == stateGone
	freed := rx.freed && p.wantMore.Load()
	var changed [15]byte
	if rx.networkChanged {
		p.changedAt = max(now, 1)
		// MakeNetworkChanged: PeerNotFound, connect time, connection
		// number, flag 1, the id the other side gave us.
		changed[0] = byte(PropPeerNotFound)
		binary.LittleEndian.PutUint64(changed[1:], uint64(p.connectTime))
		changed[9], changed[10] = p.connNum, 1
		binary.LittleEndian.PutUint32(changed[11:], uint32(p.remoteID))
	}
	p.mu.Unlock()
	if rx.networkChanged {
		s.reply(p.addr, changed[:], now)
	}
	if rx.drops > 0 {
		e.stats.malformed.Add(uint64(rx.drops))
	}
	for _, r := range rx.replies {
		if r == byte(PropShutdownOk) {
			s.write(shutdownOk, p.addr) // one byte for a Disconnect's nine: within any credit
		}
	}
	if rx.proven {
		e.pend.proven(p)
	}
	if rx.connected {
		if !p.notified {
			e.connected(p)
		}
	}
	if p.up && !p.notified {
		p.arrival = s.arrival
		for _, d := range rx.d {
			e.h.Receive(p, d.m, d.data)
		}
	}
	for _, d := range rx.d {
		putPkt(d.owner)
	}
	if rx.gone != ReasonNone {
		e.notifyLocked(p, rx.gone)
	}
	p.rmu.Unlock()
	if forget {
		e.forget(p)
	}
	if freed {
		p.appWake.Store(true)
	}
	if rx.flush || freed || rx.gone != ReasonNone {
		p.wake()
	}
}

// unknown answers a datagram from an address with no connection as
// LiteNetLib does: Disconnect gets ShutdownOk, a "network changed" packet
// gets PeerNotFound 1 (the client then gives up: how it learns the relay
// restarted), other connection traffic gets PeerNotFound. Answers are
// never longer than what came and are rate-limited. A client endpoint
// answers nothing.
func (s *socket) unknown(addr netip.AddrPort, b []byte, now int64) {
	s.e.stats.unknown.Add(1)
	if s.e.cfg.Key == "" {
		return
	}
	var reply []byte
	switch Property(b[0] & 0x1f) {
	case PropDisconnect:
		reply = shutdownOk
	case PropPeerNotFound:
		if len(b) == headerSizes[PropConnectAccept] {
			s.networkChanged(addr, b, now)
		}
		return
	case PropConnectAccept:
		if s.v1 && is2xConnectRequest(b) {
			// 2.x's InvalidProtocol, not renumbered: the 2.x client that
			// knocked at the 1.x port fails at once, as it would at a 2.x
			// server that refused its protocol id.
			s.raw(addr, invalidProtocol, now)
		}
		return
	case PropUnreliable, PropChanneled, PropReliableMerged, PropAck, PropPing, PropPong, PropMerged,
		PropMtuCheck, PropMtuOk:
		reply = peerNotFound
	}
	if reply != nil {
		s.reply(addr, reply, now)
	}
}

// reply sends an answer to a sender without a connection, within the
// socket's ReplyRate.
func (s *socket) reply(addr netip.AddrPort, b []byte, now int64) bool {
	if !s.rate.take(now) {
		s.e.stats.limited.Add(1)
		return false
	}
	s.write(b, addr)
	return true
}

// raw is reply without renumbering: b is already in the wire's numbering.
func (s *socket) raw(addr netip.AddrPort, b []byte, now int64) {
	if !s.rate.take(now) {
		s.e.stats.limited.Add(1)
		return
	}
	s.writeRaw(b, addr)
}

// write sends one packet in the engine's numbering to addr, renumbered
// for a 1.x socket (on the reader: the answers to unknown senders and
// ShutdownOk; b is at most 15 bytes there).
func (s *socket) write(b []byte, addr netip.AddrPort) {
	if s.v1 && len(b) > 0 && len(b) <= len(s.scratch) {
		n := copy(s.scratch[:], b)
		s.scratch[0] = toV1(s.scratch[0])
		b = s.scratch[:n]
	}
	s.writeRaw(b, addr)
}

// writeRaw writes one datagram outside the flush's batch (answers on the
// reader, the Disconnects of Close) and counts it with the batch's.
func (s *socket) writeRaw(b []byte, addr netip.AddrPort) {
	if _, err := s.c.WriteToUDPAddrPort(b, addr); err != nil {
		s.directErrs.Add(1)
		return
	}
	s.direct.Add(1)
}

// tokenBucket is a plain token bucket on the Endpoint's clock.
type tokenBucket struct {
	rate, burst, tokens float64
	last                int64
}

func (t *tokenBucket) take(now int64) bool {
	if now > t.last {
		t.tokens = min(t.burst, t.tokens+t.rate*float64(now-t.last)/1e9)
		t.last = now
	}
	if t.tokens < 1 {
		return false
	}
	t.tokens--
	return true
}
