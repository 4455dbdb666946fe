package litenet

import (
	"math"
	"math/rand/v2"
)

// Reflection. A server answers addresses that may be forged: a
// ConnectRequest costs nothing to send from someone else's address. So
// until a peer's address proves it receives what is sent there (proven:
// it answered a ping of a random sequence, or echoed the accept's cookie
// in "network changed"), the relay sends it, over the peer's whole life,
// no more datagrams and no more bytes than came from that address: the
// accept, acks, pings, data, resends and the Disconnects at its end all
// come out of that credit, and what does not fit waits for the address to
// send more (or is never sent). A forged source thus gets back less than
// was spent on forging it.
//
// The proof is made quickly: the first packet after the accept is
// answered with a ping at once (later pings keep PingInterval), whose
// sequence starts at a random value LiteNetLib still answers (newer than
// 0 by its 15-bit rule), and a pong naming it proves the address.

// credit is what may still be sent, in datagrams and bytes.
type credit struct{ dgrams, bytes int }

var unlimited = credit{math.MaxInt, math.MaxInt}

// firstPingSeq returns a random ping sequence to start from: 2 to 16,001,
// so every ping of the proof is newer than 0 as LiteNetLib reckons (a
// pong is sent only for a newer sequence) and a forger guesses it once in
// 16,000.
func firstPingSeq() uint16 { return uint16(2 + rand.IntN(16000)) }

// creditLocked is what p may still be sent: all it likes once proven.
// The caller holds mu.
func (p *Peer) creditLocked() credit {
	if p.proven {
		return unlimited
	}
	return credit{max(p.inDgrams-p.outDgrams, 0), max(p.inBytes-p.outBytes, 0)}
}

// countInLocked records a datagram of n bytes from p's address.
func (p *Peer) countInLocked(n int) {
	if !p.proven {
		p.inDgrams++
		p.inBytes += n
	}
}

// countOutLocked records what went to p's address: dgrams datagrams of
// bytes in all.
func (p *Peer) countOutLocked(dgrams, bytes int) {
	if !p.proven {
		p.outDgrams += dgrams
		p.outBytes += bytes
	}
}

// spentLocked charges to p what a flush's emitter used of the credit it
// was given, and notes whether packets were held back.
func (p *Peer) spentLocked(given credit, e *emitter) {
	if given != unlimited {
		p.countOutLocked(given.dgrams-e.credit.dgrams, given.bytes-e.credit.bytes)
	}
	p.starved = e.starved
}
