package litenet

import (
	"encoding/binary"
)

// delivery is one message ready for Handler.Receive. data aliases the
// datagram being processed or owner, which is released after the call.
type delivery struct {
	m     Method
	data  []byte
	owner *pkt
}

// rx is the state of one datagram's processing for one peer, owned by the
// reader goroutine that processes it (one per socket, reused).
type rx struct {
	p         *Peer // the peer being processed
	now       int64
	d         []delivery
	connected bool   // the peer's first packet after the connect request: Connected first
	proven    bool   // the peer's address just proved it receives (reflect.go)
	gone      Reason // the peer went away (remote Disconnect, PeerNotFound, a message too big)
	flush     bool   // something to send back (acks, a pong)
	freed     bool   // window space was freed
	drops     int    // malformed packets dropped
	replies   []byte // 1-byte answers owed to the sender (ShutdownOk)
	// networkChanged: the peer said PeerNotFound; it is owed the 15-byte
	// "network changed" packet naming this connection.
	networkChanged bool
}

func (rx *rx) reset(p *Peer, now int64) {
	rx.p = p
	for i := range rx.d {
		rx.d[i] = delivery{}
	}
	rx.d = rx.d[:0]
	rx.now, rx.connected, rx.gone, rx.flush, rx.freed, rx.drops = now, false, ReasonNone, false, false, 0
	rx.networkChanged, rx.proven = false, false
	rx.replies = rx.replies[:0]
}

func (rx *rx) deliver(m Method, data []byte, owner *pkt) {
	rx.d = append(rx.d, delivery{m: m, data: data, owner: owner})
}

// reliable delivers a reliable channel's packet taken in order: the
// messages of a ReliableMerged container, a fragment to reassemble, or one
// message. owner, if not nil, holds b and is released once delivered.
func (rx *rx) reliable(c *relChan, b []byte, owner *pkt) {
	m := Method(c.id)
	switch {
	case Property(b[0]&0x1f) == PropReliableMerged:
		before := len(rx.d)
		for pos := channeledHeader; pos+2 <= len(b); {
			n := int(binary.LittleEndian.Uint16(b[pos:]))
			pos += 2
			if n == 0 || pos+n > len(b) {
				rx.drops++ // corrupted: the rest of the container is lost, as in LiteNetLib
				break
			}
			rx.deliver(m, b[pos:pos+n], nil)
			pos += n
		}
		if owner != nil {
			if len(rx.d) > before {
				rx.d[len(rx.d)-1].owner = owner
			} else {
				putPkt(owner)
			}
		}
	case b[0]&0x80 != 0:
		ok, err := rx.p.addFragment(rx, m, b)
		putPkt(owner)
		if err != nil {
			rx.gone = ReasonTooBig
		} else if !ok {
			rx.drops++
		}
	default:
		rx.deliver(m, b[channeledHeader:], owner)
	}
}
