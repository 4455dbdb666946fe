package litenet

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/lockrank"
)

// Reason says why a peer went away.
type Reason uint8

// Disconnect reasons.
const (
	ReasonNone            Reason = iota
	ReasonRemote                 // the peer sent Disconnect
	ReasonTimeout                // nothing heard for DisconnectTimeout
	ReasonClosed                 // Close was called
	ReasonReconnect              // the same address connected again (a newer connect time)
	ReasonPeerNotFound           // the peer no longer knows this connection
	ReasonTooBig                 // a message past Config.MaxMessage
	ReasonEvicted                // unconfirmed, pushed out of a full pending table
	ReasonPendingTimeout         // not confirmed within PendingTimeout
	ReasonShutdown               // the endpoint closed
	ReasonRejected               // (client) the server refused the connection
	ReasonConnectFailed          // (client) no answer to the connect requests
	ReasonInvalidProtocol        // (client) the server speaks another protocol version
	numReasons
)

var reasonNames = [numReasons]string{"", "remote", "timeout", "closed", "reconnect", "peer_not_found",
	"too_big", "evicted", "pending_timeout", "shutdown", "rejected", "connect_failed", "invalid_protocol"}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "invalid"
}

// Errors of Send.
var (
	ErrClosed = errors.New("litenet: peer not connected")
	ErrTooBig = errors.New("litenet: message too big for its delivery method")
	errTooBig = ErrTooBig
)

type peerState uint8

const (
	stateOutgoing peerState = iota // (client) connect requests sent, no accept yet
	stateConnected
	stateClosing  // Close(graceful): sending what is queued, then Disconnect
	stateShutdown // Disconnect sent, repeated until ShutdownOk or shutdownLinger
	stateGone     // out of the tables
)

// shutdownLinger bounds how long a disconnected peer repeats its
// Disconnect waiting for ShutdownOk (LiteNetLib waits DisconnectTimeout).
const shutdownLinger = 2 * time.Second

// Connect retries of a client: LiteNetLib's ReconnectDelay and
// MaxConnectAttempts.
const (
	connectRetry    = 500 * time.Millisecond
	connectAttempts = 10
)

// Peer is one LiteNetLib connection. Its methods may be called from any
// goroutine. The Handler's Connected, Receive and Disconnected for one peer
// are never called concurrently and never after Disconnected.
type Peer struct {
	// Static after creation.
	e           *Endpoint
	s           *socket
	addr        netip.AddrPort
	id          int32 // our peer id (ConnectAccept)
	connectTime int64 // the connection's identity (the client's ticks)

	// Tag is the application's: set it in Handler.Connected (or right
	// after Dial), before anything else reads it.
	Tag any

	// rmu serialises the Handler's Connected, Receive and Disconnected
	// calls of this peer: held by a reader while it processes a datagram of
	// the peer and delivers its messages, and around Disconnected.
	rmu      lockrank.Mutex
	up       bool          // guarded by rmu: Connected was called
	notified bool          // guarded by rmu: Disconnected was called (or is owed no more)
	ready    chan struct{} // static (Dial only): closed under rmu once connected or gone
	readyOff bool          // guarded by rmu: ready is closed
	// arrival is the kernel's stamp (Unix ns) of the datagram whose
	// messages are being delivered, 0 without Config.Arrivals. Guarded by
	// rmu: any socket's reader may deliver for the peer.
	arrival int64

	// Flush bookkeeping, lock-free: scheduled says the peer is in its
	// socket's dirty list; appWake asks the flush to call Handler.Flush;
	// wantMore records that the last Handler.Flush left data behind (window
	// full, or a backlog limit) so that freed window space or an emptied
	// queue calls it again.
	scheduled atomic.Bool
	appWake   atomic.Bool
	wantMore  atomic.Bool
	inFlush   atomic.Bool // Handler.Flush is running: Send does not wake
	refused   atomic.Bool // Handler.Connected refused the peer: no Handler call again

	// The busy rule (Config.BusyWait), guarded by the socket's flushMu:
	// lastWoken is when a flush last found the peer woken, gap the moving
	// average of the time between such flushes (0: not known yet),
	// heldUntil when the wait for company ends (0: not waiting), held
	// that the peer is in the socket's held list.
	lastWoken, gap, heldUntil int64
	held                      bool

	// Timer wheel links: guarded by the socket's flushMu.
	wheelSlot            int32
	wheelPrev, wheelNext *Peer
	deadline             int64

	// Pending-table links (tables.go), guarded by the Endpoint's pendMu:
	// in the table's list of unproven peers and in the source address's.
	pendLinks, srcLinks peerLinks
	pending             bool // guarded by pendMu: counted in the pending table
	pendListed          bool // guarded by pendMu: in the unproven lists (evictable)

	mu         lockrank.Mutex
	state      peerState // guarded by mu
	reason     Reason    // guarded by mu: why the peer is closing or gone
	connNum    uint8     // guarded by mu (set by ConnectAccept on a client)
	remoteID   int32     // guarded by mu
	progressed bool      // guarded by mu: a packet arrived after the connect request
	confirmed  bool      // guarded by mu: Confirm was called (out of the pending table)
	// proven: the address proved it receives what we send it (a server's
	// peer: the pong to a ping of its random sequence, or the accept's
	// cookie echoed; a client's: always). Until then what is sent to it is
	// held within what it sent (reflect.go).
	proven bool // guarded by mu
	// Reflection accounting of an unproven peer: what came from its
	// address and what went to it, datagrams and bytes, over its life.
	inDgrams, inBytes, outDgrams, outBytes int          // guarded by mu
	starved                                bool         // guarded by mu: the last flush held packets back for want of credit
	lastRecv                               int64        // guarded by mu
	created                                int64        // guarded by mu
	pingSeq                                uint16       // guarded by mu: the last ping's sequence
	pingSentAt                             int64        // guarded by mu: 0 once its pong came
	pingDue                                int64        // guarded by mu
	pongSeq                                uint16       // guarded by mu: the last ping answered
	pongOwed                               bool         // guarded by mu
	ackSince                               int64        // guarded by mu: when the oldest ack still owed became owed (0: none)
	rttSum                                 int64        // guarded by mu (ms)
	rttCount                               int64        // guarded by mu
	rttReset                               int64        // guarded by mu
	resendDelay                            int64        // guarded by mu (ns): 25 ms + 2.1 x average RTT
	avgRTT                                 int64        // guarded by mu (ms)
	mtuReply                               *pkt         // guarded by mu: an MtuOk to send
	ro, ru                                 *relChan     // guarded by mu; created on first use
	sq, rs                                 *seqChan     // guarded by mu; created on first use
	unrel                                  pktQueue     // guarded by mu: Unreliable payloads to send
	fragID                                 uint16       // guarded by mu: last fragment group id sent
	frags                                  []*fragGroup // guarded by mu: messages in reassembly
	fragCost                               int          // guarded by mu: heap bytes they hold (fragment.go)
	changedAt                              int64        // guarded by mu: when this side last sent "network changed" (0: never)
	closeBy                                int64        // guarded by mu: a graceful close sends Disconnect by then
	shutNext                               int64        // guarded by mu: next Disconnect repeat
	shutUntil                              int64        // guarded by mu: stop repeating (and forget the peer) then
	attempts                               int          // guarded by mu: connect requests sent (client)
	connectNext                            int64        // guarded by mu: next connect request (client)
	request                                []byte
}

// Addr is the peer's address.
func (p *Peer) Addr() netip.AddrPort { return p.addr }

// Arrival is, during the Handler's Receive, when the kernel received the
// datagram whose reading delivered the message (Config.Arrivals, Linux;
// every message of a merged datagram has the same), else the zero time.
// Only Receive may call it: the reader delivers under the peer's rmu,
// and the next datagram changes it.
func (p *Peer) Arrival() time.Time {
	if ns := p.arrival; ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// RTT is the average round-trip time measured by pings.
func (p *Peer) RTT() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(p.avgRTT) * time.Millisecond
}

func newPeer(e *Endpoint, s *socket, addr netip.AddrPort, connectTime int64, cn uint8, now int64) *Peer {
	p := &Peer{
		e:           e,
		s:           s,
		addr:        addr,
		connectTime: connectTime,
		connNum:     cn,
		wheelSlot:   -1,
		state:       stateConnected,
		lastRecv:    now,
		created:     now,
		pingSeq:     1,
		resendDelay: int64(27 * time.Millisecond),
		rttReset:    now,
		rmu:         lockrank.Mutex{Class: lockrank.LiteDeliver},
		mu:          lockrank.Mutex{Class: lockrank.LitePeer},
	}
	return p
}

// channel returns the channel of id, creating a sending channel if create.
func (p *Peer) relChannel(id uint8, create bool) *relChan {
	c := &p.ru
	if id == uint8(ReliableOrdered) {
		c = &p.ro
	}
	if *c == nil && create {
		*c = &relChan{id: id, ordered: id == uint8(ReliableOrdered), merge: p.e.cfg.Version != V1}
	}
	return *c
}

func (p *Peer) seqChannel(id uint8, create bool) *seqChan {
	c := &p.sq
	if id == uint8(ReliableSequenced) {
		c = &p.rs
	}
	if *c == nil && create {
		*c = &seqChan{id: id, reliable: id == uint8(ReliableSequenced)}
	}
	return *c
}

// Send queues data for delivery with method m; it copies data. A message
// too long for one packet is refused with ErrTooBig unless m fragments
// (ReliableOrdered, ReliableUnordered), up to Config.MaxMessage. It
// returns ErrClosed once the peer is closing.
func (p *Peer) Send(m Method, data []byte) error {
	p.mu.Lock()
	err := p.sendLocked(m, data)
	p.mu.Unlock()
	if err == nil && !p.inFlush.Load() {
		if p.e.cfg.SendFlushes {
			p.s.sendFlush(p)
		} else {
			p.wake()
		}
	}
	return err
}

func (p *Peer) sendLocked(m Method, data []byte) error {
	if p.state != stateConnected && p.state != stateClosing {
		return ErrClosed
	}
	switch {
	case m == Unreliable:
		if len(data) > MaxUnreliablePayload {
			return ErrTooBig
		}
		p.unrel.push(copyPkt(data))
	case m == Sequenced || m == ReliableSequenced:
		if len(data) > MaxChanneledPayload {
			return ErrTooBig
		}
		p.seqChannel(uint8(m), true).queue.push(copyPkt(data))
	case m.Fragments():
		if len(data) > p.e.cfg.MaxMessage {
			return ErrTooBig
		}
		c := p.relChannel(uint8(m), true)
		if len(data) <= MaxChanneledPayload {
			c.queue.push(copyPkt(data))
			return nil
		}
		p.fragID++
		total := (len(data) + fragmentPayload - 1) / fragmentPayload
		for part := range total {
			chunk := data[part*fragmentPayload : min(len(data), (part+1)*fragmentPayload)]
			f := getPkt(fragmentedHeader + len(chunk))
			f.b = append(f.b, byte(PropChanneled)|0x80|p.connNum<<5, 0, 0, uint8(m))
			f.b = binary.LittleEndian.AppendUint16(f.b, p.fragID)
			f.b = binary.LittleEndian.AppendUint16(f.b, uint16(part))
			f.b = binary.LittleEndian.AppendUint16(f.b, uint16(total))
			f.b = append(f.b, chunk...)
			f.seq = fragmentMark
			c.queue.push(f)
		}
	default:
		return ErrTooBig
	}
	return nil
}

// Backlog is the number of messages and packets queued and not yet sent:
// a sender that wants to bound what the peer buffers stops above a limit.
func (p *Peer) Backlog() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.backlogLocked()
}

// backlogLocked is Backlog with mu held.
func (p *Peer) backlogLocked() int {
	n := p.unrel.len()
	for _, c := range [...]*relChan{p.ro, p.ru} {
		if c != nil {
			n += c.queue.len()
		}
	}
	for _, c := range [...]*seqChan{p.sq, p.rs} {
		if c != nil {
			n += c.queue.len()
		}
	}
	return n
}

// Wake asks for a flush of the peer soon, with a call of Handler.Flush.
func (p *Peer) Wake() {
	p.appWake.Store(true)
	p.wake()
}

// wake puts the peer in its socket's dirty list (once).
func (p *Peer) wake() {
	if !p.scheduled.Swap(true) {
		p.s.schedule(p)
	}
}

// Close ends the connection. Graceful: what is queued is sent first, and
// Disconnect follows once every reliable packet is acknowledged, or after
// Config.CloseGrace; abrupt: Disconnect at once, the queues dropped.
// Handler.Disconnected follows (ReasonClosed), from another goroutine.
func (p *Peer) Close(graceful bool) {
	p.mu.Lock()
	now := p.e.now()
	switch {
	case p.state == stateConnected && graceful:
		p.state, p.reason = stateClosing, ReasonClosed
		p.closeBy = now + int64(p.e.cfg.CloseGrace)
	case p.state == stateConnected || p.state == stateClosing || p.state == stateOutgoing:
		p.shutdownLocked(now, ReasonClosed)
	}
	p.mu.Unlock()
	p.Wake()
}

// shutdownLocked drops everything queued and starts repeating Disconnect.
func (p *Peer) shutdownLocked(now int64, why Reason) {
	if p.state == stateShutdown || p.state == stateGone {
		return
	}
	p.state, p.reason = stateShutdown, why
	p.shutNext = now
	p.shutUntil = now + int64(shutdownLinger)
	p.releaseLocked()
}

// releaseLocked frees every buffer the peer holds.
func (p *Peer) releaseLocked() {
	for _, c := range [...]*relChan{p.ro, p.ru} {
		if c != nil {
			c.release()
		}
	}
	for _, c := range [...]*seqChan{p.sq, p.rs} {
		if c != nil {
			c.release()
		}
	}
	p.ro, p.ru, p.sq, p.rs = nil, nil, nil, nil
	p.unrel.release()
	p.releaseFrags()
	putPkt(p.mtuReply)
	p.mtuReply = nil
}

// rtt records one round-trip sample (LiteNetLib's UpdateRoundTripTime).
func (p *Peer) rttLocked(ms int64) {
	p.rttSum += ms
	p.rttCount++
	p.avgRTT = p.rttSum / p.rttCount
	p.resendDelay = int64(25*time.Millisecond) + p.avgRTT*int64(2.1*float64(time.Millisecond))
}

// signalReadyLocked wakes Dial once the connection is up or over. The
// caller holds rmu.
func (p *Peer) signalReadyLocked() {
	if p.ready != nil && !p.readyOff {
		p.readyOff = true
		close(p.ready)
	}
}
