package udptransport

import (
	"errors"

	"github.com/purrfly/purrfly/internal/delivery"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/udpframe"
)

// conn is one LiteNetLib peer as a core connection's transport. t, p and c are
// static after Connected. litenet serialises Receive and Disconnected per
// peer, which makes the socket reader this conn's reader; while a routed
// authentication runs (authing), its goroutine is the reader instead, and
// what arrives meanwhile waits in early.
type conn struct {
	t *Transport
	p *litenet.Peer
	c *core.Conn

	mu      lockrank.Mutex
	started bool           // guarded by mu: the first message came
	authing bool           // guarded by mu: the auth goroutine is the reader
	early   []*buf.Buf     // guarded by mu: frames received while authing, in order
	left    bool           // guarded by mu: the peer went away while authing
	why     litenet.Reason // guarded by mu: why, for left
}

// Wake: the core queued frames; the flush pulls them.
func (uc *conn) Wake() { uc.p.Wake() }

// Closed: graceful reasons send what is queued (and wait for the acks)
// before LiteNetLib's Disconnect; abrupt ones disconnect at once.
func (uc *conn) Closed(reason core.Reason) { uc.p.Close(reason.Flush()) }

// deliver routes one message of the peer. The first one (the
// authentication) is routed on a goroutine of its own when it may name a
// room held by another machine.
func (uc *conn) deliver(b *buf.Buf) {
	uc.mu.Lock()
	if uc.authing {
		if len(uc.early) >= earlyMax {
			uc.mu.Unlock()
			buf.Put(b)
			uc.t.cfg.Core.Drop(core.DropSenderClosed)
			uc.c.Close(core.ReasonQueueOverflow)
			return
		}
		uc.early = append(uc.early, b)
		uc.mu.Unlock()
		uc.t.m.early.Inc()
		return
	}
	first := !uc.started
	uc.started = true
	may := uc.t.cfg.MayForward
	if first && may != nil && !uc.c.Closing() && may(b.Frame()) {
		uc.authing = true
		uc.mu.Unlock()
		uc.t.cfg.Sessions.Add(1)
		go uc.authRouted(b)
		return
	}
	uc.mu.Unlock()
	uc.handle(b)
}

// handle gives b to the core, its delivery method taken out of PurrNet's
// UDP framing, and confirms the peer once authenticated.
func (uc *conn) handle(b *buf.Buf) {
	authing := uc.c.Role() == core.RoleNone
	if !udpframe.Unframe(uc.t.cfg.Core, uc.c, b) {
		return
	}
	uc.t.cfg.Core.Handle(uc.c, b)
	if authing && uc.c.Role() != core.RoleNone {
		uc.p.Confirm()
	}
}

// authRouted routes a first message that may belong to another machine
// (forward.go), then everything that arrived meanwhile, in order, and
// hands the reading back to the socket reader.
func (uc *conn) authRouted(first *buf.Buf) {
	defer uc.t.cfg.Sessions.Done()
	if uc.t.cfg.Forward(uc.c, first, true) {
		uc.p.Confirm()
	} else {
		uc.handle(first)
	}
	for {
		uc.mu.Lock()
		if len(uc.early) == 0 {
			uc.authing = false
			left, why := uc.left, uc.why
			uc.mu.Unlock()
			if left {
				uc.end(why)
			}
			return
		}
		b := uc.early[0]
		uc.early[0] = nil
		uc.early = uc.early[1:]
		uc.mu.Unlock()
		if uc.c.Closing() {
			buf.Put(b)
			uc.t.cfg.Core.Drop(core.DropSenderClosed)
			continue
		}
		uc.handle(b)
	}
}

// flush sends what the core queued for the peer, within Backlog, and
// reports whether frames were left behind. It runs in litenet's flush
// (Handler.Flush).
func (uc *conn) flush() bool {
	var arr [core.MaxBatch]*buf.Buf
	for uc.p.Backlog() < Backlog {
		batch := uc.c.TakeBatch(arr[:0])
		if len(batch) == 0 {
			return false
		}
		for i, b := range batch {
			uc.send(b)
			buf.Put(b)
			batch[i] = nil
		}
	}
	return uc.c.Queued()
}

// maxUDPSingle is the longest frame one LiteNetLib packet carries for a
// method that cannot fragment.
func maxUDPSingle(m litenet.Method) int {
	if m == litenet.Unreliable {
		return litenet.MaxUnreliablePayload
	}
	return litenet.MaxChanneledPayload
}

// send queues one frame on the peer with its delivery method.
func (uc *conn) send(b *buf.Buf) {
	m := delivery.Method(b.Method)
	data := b.Frame()
	if !m.Fragments() && len(data) > maxUDPSingle(m) {
		if !m.Reliable() {
			uc.t.cfg.Core.Drop(core.DropTooLargeForUDP)
			return
		}
		m = litenet.ReliableOrdered // PurrLay's rule for a reliable frame too long for its method
		uc.t.m.upgraded.Inc()
	}
	if err := uc.p.Send(m, data); err != nil {
		if errors.Is(err, litenet.ErrClosed) {
			uc.t.cfg.Core.Drop(core.DropReceiverClosed)
		} else {
			uc.t.cfg.Core.Drop(core.DropTooLargeForUDP)
		}
	}
}

// gone: litenet says the peer left (or was dropped).
func (uc *conn) gone(why litenet.Reason) {
	uc.mu.Lock()
	if uc.authing {
		uc.left, uc.why = true, why
		uc.mu.Unlock()
		return // the auth goroutine ends it when done
	}
	uc.mu.Unlock()
	uc.end(why)
}

// end is the end of the conn: it leaves the core once and frees what is
// queued. Only the conn's reader calls it.
func (uc *conn) end(why litenet.Reason) {
	uc.c.Close(reasonOfPeer(why)) // before leaving, as ws.go's end does
	uc.t.cfg.Core.Leave(uc.c)
	uc.c.ReleaseQueue()
	uc.mu.Lock()
	early := uc.early
	uc.early = nil
	uc.mu.Unlock()
	for _, b := range early {
		buf.Put(b)
	}
	uc.t.cfg.Sessions.Done()
}

// reasonOfPeer maps why LiteNetLib lost a peer to the core's reason.
func reasonOfPeer(why litenet.Reason) core.Reason {
	switch why {
	case litenet.ReasonPendingTimeout:
		return core.ReasonAuthTimeout
	case litenet.ReasonTooBig:
		return core.ReasonTooBig
	case litenet.ReasonTimeout:
		return core.ReasonPeerTimeout
	case litenet.ReasonShutdown:
		return core.ReasonShutdown
	}
	return core.ReasonPeerClosed
}

// initLock gives the connection's mutex its lock-rank class.
func (uc *conn) initLock() { uc.mu.Class = lockrank.UDPConn }
