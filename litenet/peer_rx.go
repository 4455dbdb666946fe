package litenet

import (
	"encoding/binary"
	"time"
)

// receive processes one verified datagram from the peer's address (not a
// ConnectRequest or NatMessage: the endpoint handles those). The caller
// holds rmu and mu; what is to be delivered or answered goes to rx.
func (p *Peer) receive(rx *rx, b []byte) {
	prop, cn, _ := header(b[0])
	switch p.state {
	case stateOutgoing:
		p.receiveOutgoing(rx, prop, b)
		return
	case stateShutdown:
		if prop == PropShutdownOk {
			p.shutUntil = rx.now // answered: forget it at the next flush
			rx.flush = true
		}
		return
	case stateGone:
		return
	}
	switch prop {
	case PropShutdownOk, PropConnectAccept, PropInvalidProtocol, PropEmpty:
		return
	case PropDisconnect:
		if len(b) >= 9 && int64(binary.LittleEndian.Uint64(b[1:])) == p.connectTime && cn == p.connNum {
			rx.replies = append(rx.replies, byte(PropShutdownOk))
			p.goneLocked(rx, ReasonRemote)
		}
		return
	case PropPeerNotFound:
		switch {
		case len(b) == 1 && p.e.cfg.Key == "":
			// The server does not know this address (we were evicted, or
			// it restarted): tell it which connection this is ("network
			// changed"); a server that cannot place it answers
			// PeerNotFound 1. A server ignores PeerNotFound from its
			// clients: a client that lost its connection connects anew,
			// and anyone who can forge a client's address could otherwise
			// end the client's connection with two datagrams.
			rx.networkChanged = true
		case len(b) == 2 && b[1] == 1 && p.changedAt != 0 && rx.now-p.changedAt < int64(shutdownLinger):
			// The answer to our "network changed": the server really does
			// not know this connection (it restarted). Unasked, it is
			// ignored.
			p.goneLocked(rx, ReasonPeerNotFound)
		}
		return
	}
	if cn != p.connNum {
		rx.drops++ // a packet of an older connection from this address
		return
	}
	p.lastRecv = rx.now
	if !p.progressed {
		p.progressed = true
		rx.connected = true
		rx.flush = true // its timers change: pings start
		p.pingDue = rx.now + int64(p.e.cfg.PingInterval)
		if !p.proven {
			p.pingDue = rx.now // the first ping asks the address to prove itself (reflect.go)
		}
	}
	if prop != PropMerged {
		p.packet(rx, b)
		return
	}
	for pos := 1; pos+2 <= len(b); {
		n := int(binary.LittleEndian.Uint16(b[pos:]))
		pos += 2
		if n == 0 || len(b)-pos < n {
			if n != 0 {
				rx.drops++
			}
			break
		}
		inner := b[pos : pos+n]
		pos += n
		if !verify(inner) {
			rx.drops++
			break
		}
		if Property(inner[0]&0x1f) == PropMerged {
			rx.drops++ // no real sender nests them
			continue
		}
		p.packet(rx, inner)
		if rx.gone != ReasonNone {
			return
		}
	}
}

// receiveOutgoing handles what a connecting client may get: the accept,
// a rejection (Disconnect with its connect time), InvalidProtocol.
func (p *Peer) receiveOutgoing(rx *rx, prop Property, b []byte) {
	switch prop {
	case PropConnectAccept:
		a, err := ParseConnectAccept(b)
		if err != nil || a.ConnectTime != p.connectTime {
			rx.drops++
			return
		}
		p.state = stateConnected
		p.connNum, p.remoteID = a.ConnNum, a.PeerID
		p.lastRecv = rx.now
		p.progressed = true
		p.pingDue = rx.now + int64(p.e.cfg.PingInterval)
		rx.connected = true
		rx.flush = true
	case PropDisconnect:
		if len(b) >= 9 && int64(binary.LittleEndian.Uint64(b[1:])) == p.connectTime {
			rx.replies = append(rx.replies, byte(PropShutdownOk))
			p.goneLocked(rx, ReasonRejected)
		}
	case PropInvalidProtocol:
		p.goneLocked(rx, ReasonInvalidProtocol)
	}
}

// packet processes one packet (a datagram's, or one inside Merged) of a
// connected peer.
func (p *Peer) packet(rx *rx, b []byte) {
	prop, cn, _ := header(b[0])
	if cn != p.connNum {
		rx.drops++
		return
	}
	switch prop {
	case PropPing:
		if seq := binary.LittleEndian.Uint16(b[1:]); relSeq(int(seq), int(p.pongSeq)) > 0 {
			p.pongSeq, p.pongOwed = seq, true
			rx.flush = true
		}
	case PropPong:
		if binary.LittleEndian.Uint16(b[1:]) == p.pingSeq && p.pingSentAt != 0 {
			p.rttLocked((rx.now - p.pingSentAt) / int64(time.Millisecond))
			p.pingSentAt = 0
			if !p.proven {
				// Only the address could read the ping's random sequence.
				p.proven, rx.proven = true, true
			}
		}
	case PropAck:
		switch id := b[3]; Method(id) {
		case ReliableOrdered, ReliableUnordered:
			if c := p.relChannel(id, false); c != nil && c.ack(b) {
				rx.freed = true
				// Queued messages can enter the window now, and a closing
				// peer may be drained: its Disconnect goes at once.
				rx.flush = rx.flush || c.queue.len() > 0 || p.state == stateClosing
			}
		case ReliableSequenced:
			if len(b) == seqAckSize && p.rs != nil {
				p.rs.ack(b)
			}
		}
	case PropChanneled, PropReliableMerged:
		switch id := b[3]; Method(id) {
		case ReliableOrdered, ReliableUnordered:
			if !p.relChannel(id, true).receive(rx, b) {
				rx.drops++
			}
			p.owesAck(rx)
		case Sequenced, ReliableSequenced:
			if prop != PropChanneled || !p.seqChannel(id, true).receive(rx, b) {
				rx.drops++
			}
			if Method(id) == ReliableSequenced {
				p.owesAck(rx)
			}
		default:
			rx.drops++
		}
	case PropUnreliable:
		rx.deliver(Unreliable, b[1:], nil)
	case PropMtuCheck:
		// Answered as LiteNetLib answers it (ProcessMtuPacket): the same
		// packet back as MtuOk when its size is a plausible MTU and written
		// at both ends. MTU discovery itself stays off.
		n := len(b)
		if n >= MTU && n <= MaxPacketSize && int(binary.LittleEndian.Uint32(b[1:])) == n &&
			int(binary.LittleEndian.Uint32(b[n-4:])) == n && p.mtuReply == nil {
			p.mtuReply = copyPkt(b)
			p.mtuReply.b[0] = byte(PropMtuOk) | p.connNum<<5
			rx.flush = true
		}
	case PropMtuOk:
	default:
		rx.drops++
	}
}

// goneLocked ends the peer from its reader: no more sends, the endpoint
// drops it from its tables and calls Handler.Disconnected.
func (p *Peer) goneLocked(rx *rx, why Reason) {
	p.state, p.reason = stateGone, why
	p.releaseLocked()
	rx.gone = why
}

// owesAck notes that an ack is owed (the channel set mustAck): it goes out
// with the next packet to the peer, or one tick later (peer_tx.go).
func (p *Peer) owesAck(rx *rx) {
	if p.ackSince == 0 {
		p.ackSince = max(rx.now, 1)
	}
	rx.flush = true
}
