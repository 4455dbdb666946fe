package litenet

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"net/netip"
)

// connectRequest handles a ConnectRequest (LiteNetManager's
// ProcessConnectRequest and AcceptIfKey): a wrong protocol id is answered
// InvalidProtocol, a wrong key Disconnect (the client reports
// ConnectionRejected), a repeat of the accepted request the same accept, a
// newer connect time from a connected address a reconnection with the next
// connection number. A new connection is accepted at once with a 15-byte
// ConnectAccept, and is pending until the application confirms it: the
// pending table is bounded in total and per source address, and at either
// bound the oldest pending connection whose address has not proved itself
// is evicted, of the same source at its bound (tables.go), so requests
// forged from an address never keep out a client that receives there.
func (s *socket) connectRequest(addr netip.AddrPort, b []byte, now int64) {
	e := s.e
	req, err := ParseConnectRequest(b)
	switch {
	case errors.Is(err, ErrProtocol):
		s.reply(addr, invalidProtocol, now)
		return
	case err != nil:
		e.stats.malformed.Add(1)
		return
	case e.cfg.Key == "":
		return // a client accepts nobody
	}
	if key, err := req.Key(); err != nil || string(key) != e.cfg.Key {
		e.stats.refused.Add(1)
		var d [9]byte
		s.reply(addr, AppendDisconnect(d[:0], req.ConnNum, req.ConnectTime), now)
		return
	}
	cn := req.ConnNum
	if old := e.peers.get(addr); old != nil {
		old.mu.Lock()
		switch {
		case old.state == stateOutgoing || req.ConnectTime < old.connectTime:
			old.mu.Unlock()
			return // an older request, late
		case req.ConnectTime == old.connectTime:
			if old.state == stateConnected || old.state == stateClosing {
				var a [15]byte
				AppendConnectAccept(a[:0], old.connectTime, old.connNum, old.id)
				old.countInLocked(len(b))
				old.countOutLocked(1, len(a)) // counted sent, rate limit or not: never less than was
				old.mu.Unlock()
				s.reply(addr, a[:], now) // the accept was lost: the same one again
				return
			}
			old.mu.Unlock()
			return // a repeat for a connection that is over
		}
		// A newer connection from the same address replaces the old one.
		cn = (old.connNum + 1) % maxConnNum
		if old.state != stateGone {
			old.state, old.reason = stateGone, ReasonReconnect
			old.releaseLocked()
		}
		old.mu.Unlock()
		e.notify(old, ReasonReconnect)
		e.forget(old)
	}
	if !s.rate.take(now) {
		e.stats.limited.Add(1)
		return
	}
	id := e.cookie(addr, req.ConnectTime)
	var a [15]byte
	accept := AppendConnectAccept(a[:0], req.ConnectTime, cn, id)
	if int(e.peers.n.Load()) < e.cfg.MaxPeers {
		p := newPeer(e, s, addr, req.ConnectTime, cn, now)
		p.remoteID, p.id = req.PeerID, id
		p.pingSeq = firstPingSeq()
		p.countInLocked(len(b))
		p.countOutLocked(1, len(accept))
		if e.admit(p, false) {
			e.stats.accepted.Add(1)
			p.wake() // the flush puts its timers (pending timeout) on the wheel
		}
	}
	// Accepted with state, or, with the tables full, without: a real client
	// then proves itself with the cookie (networkChanged).
	s.write(accept, addr)
}

// admit enters a new peer in the pending and peer tables, evicting the
// oldest unproven pending connection when the pending table is full. An
// evicted client that was real recovers: its first packet gets
// PeerNotFound, and its "network changed" answer carries the cookie.
func (e *Endpoint) admit(p *Peer, proven bool) bool {
	evicted, ok := e.pend.admit(p, e.cfg.MaxPending, e.cfg.MaxPendingPerIP, proven)
	if evicted != nil {
		e.stats.evicted.Add(1)
		evicted.mu.Lock()
		if evicted.state != stateGone {
			evicted.state, evicted.reason = stateGone, ReasonEvicted
			evicted.releaseLocked()
		}
		evicted.mu.Unlock()
		e.notify(evicted, ReasonEvicted)
		e.peers.remove(evicted)
	}
	if !ok {
		e.stats.refused.Add(1)
		return false
	}
	e.peers.put(p)
	return true
}

// cookie is the peer id a ConnectAccept hands out: a keyed hash of the
// client's address and connect time, so that the client's "network
// changed" packet, which echoes it, proves it received our accept (a
// forged source cannot see it).
func (e *Endpoint) cookie(addr netip.AddrPort, connectTime int64) int32 {
	m := hmac.New(sha256.New, e.cookieKey[:])
	ip := addr.Addr().As16()
	m.Write(ip[:])
	var b [10]byte
	binary.LittleEndian.PutUint16(b[:], addr.Port())
	binary.LittleEndian.PutUint64(b[2:], uint64(connectTime))
	m.Write(b[:])
	var sum [sha256.Size]byte
	return int32(binary.LittleEndian.Uint32(m.Sum(sum[:0])) & 0x7fffffff)
}

// networkChanged handles a 15-byte "network changed" PeerNotFound from an
// address with no connection: a client we accepted but hold no state for
// (evicted, or accepted while the tables were full) answers our
// PeerNotFound this way. With the right cookie it becomes a connection at
// once (it proved it hears us); otherwise it gets PeerNotFound 1 and gives
// up, as a client of a relay that restarted must.
func (s *socket) networkChanged(addr netip.AddrPort, b []byte, now int64) {
	e := s.e
	connectTime := int64(binary.LittleEndian.Uint64(b[1:]))
	cn, flag, id := b[9], b[10], int32(binary.LittleEndian.Uint32(b[11:]))
	if flag != 1 || cn >= maxConnNum || id != e.cookie(addr, connectTime) || int(e.peers.n.Load()) >= e.cfg.MaxPeers {
		s.reply(addr, peerNotFoundHard, now)
		return
	}
	p := newPeer(e, s, addr, connectTime, cn, now)
	p.id = id
	p.progressed, p.proven = true, true // it echoed the cookie: it receives here
	p.pingDue = now + int64(e.cfg.PingInterval)
	if !e.admit(p, true) {
		return
	}
	e.stats.accepted.Add(1)
	p.rmu.Lock()
	e.connected(p)
	p.rmu.Unlock()
	p.wake()
}
