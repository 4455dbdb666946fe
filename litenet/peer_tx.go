package litenet

import (
	"encoding/binary"
	"time"
)

// emit puts whatever the peer owes into e (acks, pong, ping, window packets
// due, queued messages, Disconnect repeats), runs its timers (timeouts,
// close grace, connect retries) and returns when it next needs attention
// (0: never) and whether it just left (Handler.Disconnected owed) or is to
// be forgotten. The caller holds mu.
func (p *Peer) emit(e *emitter, now int64) (next int64, left, forget bool) {
	cfg := &p.e.cfg
	switch p.state {
	case stateGone:
		return 0, false, true
	case stateOutgoing:
		return p.emitConnect(e, now)
	case stateShutdown:
		if now >= p.shutUntil {
			p.state = stateGone
			return 0, false, true
		}
		if now >= p.shutNext {
			var d [9]byte
			// Repeated on schedule even when an unproven address's credit
			// held it back: only its own datagrams would release it.
			if e.addAlone(AppendDisconnect(d[:0], p.connNum, p.connectTime)) || e.starved {
				p.shutNext = now + int64(shutdownDelay)
			}
		}
		return min(p.shutNext, p.shutUntil), false, false
	}

	// Connected or closing.
	timedOut := now-p.lastRecv > int64(cfg.DisconnectTimeout)
	pendingOut := !p.confirmed && now-p.created > int64(cfg.PendingTimeout)
	switch {
	case (timedOut || pendingOut) && !p.progressed:
		// Never heard from after the accept (maybe a forged address):
		// forgotten without a word, so nothing but the accept was ever
		// sent to it.
		p.state, p.reason = stateGone, ReasonPendingTimeout
		if timedOut {
			p.reason = ReasonTimeout
		}
		p.releaseLocked()
		return 0, true, true
	case timedOut:
		p.shutdownLocked(now, ReasonTimeout)
		return p.emitShutdown(e, now)
	case pendingOut:
		p.shutdownLocked(now, ReasonPendingTimeout)
		return p.emitShutdown(e, now)
	}
	if p.progressed && now >= p.pingDue {
		var b [3]byte
		if p.pingSentAt != 0 {
			// No pong for the last ping: its wait counts as a sample.
			p.rttLocked((now - p.pingSentAt) / int64(time.Millisecond))
		}
		p.pingSeq++
		b[0] = byte(PropPing) | p.connNum<<5
		binary.LittleEndian.PutUint16(b[1:], p.pingSeq)
		if e.add(b[:]) {
			p.pingSentAt = max(now, 1) // 0 means no ping outstanding
		}
		p.pingDue = now + int64(cfg.PingInterval)
	}
	if now-p.rttReset >= 3*int64(cfg.PingInterval) {
		p.rttReset = now
		p.rttSum, p.rttCount = p.avgRTT, 1
	}
	if p.pongOwed {
		var b [11]byte
		b[0] = byte(PropPong) | p.connNum<<5
		binary.LittleEndian.PutUint16(b[1:], p.pongSeq)
		binary.LittleEndian.PutUint64(b[3:], uint64(Ticks(p.e.clk.Now())))
		if e.add(b[:]) {
			p.pongOwed = false
		}
	}
	if p.mtuReply != nil && e.add(p.mtuReply.b) {
		putPkt(p.mtuReply)
		p.mtuReply = nil
	}
	next = p.lastRecv + int64(cfg.DisconnectTimeout)
	if p.progressed {
		next = min(next, p.pingDue)
	}
	if !p.confirmed {
		next = min(next, p.created+int64(cfg.PendingTimeout))
	}
	timers := next // what falls due without sending anything
	resends := 0
	for _, c := range [...]*relChan{p.ro, p.ru} {
		if c == nil {
			continue
		}
		c.fill(p.connNum)
		due, n := c.emit(e, now, p.resendDelay)
		next, resends = minDeadline(next, due), resends+n
	}
	for _, c := range [...]*seqChan{p.sq, p.rs} {
		if c == nil {
			continue
		}
		due, n := c.emit(e, now, p.resendDelay)
		next, resends = minDeadline(next, due), resends+n
	}
	for p.unrel.len() > 0 {
		b := [1]byte{byte(PropUnreliable) | p.connNum<<5}
		if !e.add2(b[:], p.unrel.peek().b) {
			next = now // out of room: due again at once (unless starved, below)
			break
		}
		putPkt(p.unrel.pop())
	}
	// Acks ride with whatever else goes to the peer; alone they wait up to
	// one tick, so that a burst of packets is acknowledged by one datagram
	// (a stock client in manual mode reads one datagram per frame). The
	// sender's resend delay is 25 ms or more. The busy rule (Config.BusyWait)
	// does not hurry them: an ack delays no message, and alone it would
	// double the datagrams a peer sending reliably is sent.
	if p.ackSince != 0 {
		if e.added > 0 || now >= p.ackSince+int64(cfg.Tick) {
			p.emitAcks(e)
		} else {
			next = minDeadline(next, p.ackSince+int64(cfg.Tick))
		}
	}
	if resends > 0 {
		p.e.stats.resent.Add(uint64(resends))
	}
	if e.starved {
		// Held back for want of credit (reflect.go): nothing is due until
		// the address sends more (receive wakes the peer) or a timer runs.
		next = timers
	}
	if p.state == stateClosing {
		if now >= p.closeBy || p.drainedLocked() && !p.wantMore.Load() {
			p.shutdownLocked(now, p.reason)
			return p.emitShutdown(e, now)
		}
		next = minDeadline(next, p.closeBy)
	}
	return next, false, false
}

// emitShutdown sends the first Disconnect of a peer that just left.
func (p *Peer) emitShutdown(e *emitter, now int64) (int64, bool, bool) {
	next, _, _ := p.emit(e, now)
	return next, true, false
}

// emitConnect repeats a client's ConnectRequest until the accept comes.
func (p *Peer) emitConnect(e *emitter, now int64) (int64, bool, bool) {
	if now < p.connectNext {
		return p.connectNext, false, false
	}
	if p.attempts > connectAttempts {
		p.state, p.reason = stateGone, ReasonConnectFailed
		return 0, true, true
	}
	if e.add(p.request) {
		p.attempts++
		p.connectNext = now + int64(connectRetry)
	}
	return p.connectNext, false, false
}

// drainedLocked reports whether nothing is queued or waiting for an ack.
func (p *Peer) drainedLocked() bool {
	for _, c := range [...]*relChan{p.ro, p.ru} {
		if c != nil && !c.idle() {
			return false
		}
	}
	for _, c := range [...]*seqChan{p.sq, p.rs} {
		if c != nil && !c.idle() {
			return false
		}
	}
	return p.unrel.len() == 0
}

// emitAcks sends every ack owed.
func (p *Peer) emitAcks(e *emitter) {
	done := true
	for _, c := range [...]*relChan{p.ro, p.ru} {
		if c != nil {
			done = c.emitAck(e) && done
		}
	}
	if p.rs != nil {
		done = p.rs.emitAck(e) && done
	}
	if done {
		p.ackSince = 0
	}
}
