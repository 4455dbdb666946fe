package litenet

import "encoding/binary"

// Reassembly bounds. A peer holds at most maxFragGroups messages in
// reassembly at once (LiteNetLib's 64: a sender's ReliableUnordered window
// may carry 32 messages' fragments, ReliableOrdered one at a time), each of
// at most maxFragments parts and Config.MaxMessage bytes, and at most
// fragBudget bytes in all (unconfirmedFragBudget before the application
// confirms the peer: all it may send then is an authentication message).
// A ReliableUnordered fragment that would pass those bounds is refused
// before it is acknowledged, so the sender sends it again once groups
// complete: nothing acknowledged is ever dropped.
const (
	maxFragGroups         = 64
	maxFragments          = 256
	unconfirmedFragBudget = 16 << 10
	// unconfirmedHeld bounds the out-of-order packets an unconfirmed
	// peer's ReliableOrdered channel holds; past it they are refused
	// unacknowledged (sent again later).
	unconfirmedHeld = 8
)

// fragBudget is the bytes a confirmed peer may hold in reassembly.
func (p *Peer) fragBudget() int {
	if !p.confirmed {
		return unconfirmedFragBudget
	}
	return 2 * p.e.cfg.MaxMessage
}

// fragGroup is one message being reassembled. Guarded by the Peer's mu.
type fragGroup struct {
	id    uint16
	ch    uint8
	total int
	got   int
	size  int
	parts []*pkt // by part index; each holds the fragment's payload
}

// admitFragment says whether a new ReliableUnordered fragment can be
// taken now (a part of a message already in reassembly always can).
func (p *Peer) admitFragment(b []byte) bool {
	if len(b) < fragmentedHeader {
		return true // malformed: dropped after the ack, as LiteNetLib does
	}
	id := binary.LittleEndian.Uint16(b[4:])
	for _, g := range p.frags {
		if g.id == id {
			return true
		}
	}
	return len(p.frags) < maxFragGroups && p.fragBytes+len(b)-fragmentedHeader <= p.fragBudget()
}

// addFragment takes one fragment (a whole fragmented Channeled packet of a
// reliable channel, delivered in the channel's order) and delivers the
// message once every part is in. It returns errTooBig when the message
// would pass maxMessage; a malformed or unexpected fragment is dropped
// (false).
func (p *Peer) addFragment(rx *rx, m Method, b []byte) (bool, error) {
	id := binary.LittleEndian.Uint16(b[4:])
	part := int(binary.LittleEndian.Uint16(b[6:]))
	total := int(binary.LittleEndian.Uint16(b[8:]))
	if total == 0 || part >= total {
		return false, nil
	}
	if total > maxFragments {
		return false, errTooBig
	}
	var g *fragGroup
	for _, x := range p.frags {
		if x.id == id {
			g = x
			break
		}
	}
	if g == nil {
		if len(p.frags) >= maxFragGroups {
			return false, errTooBig // only a ReliableOrdered group can get here: one at a time is all a sender makes
		}
		g = &fragGroup{id: id, ch: b[3], total: total, parts: make([]*pkt, total)}
		p.frags = append(p.frags, g)
	} else if g.total != total || g.ch != b[3] {
		return false, nil
	}
	if g.parts[part] != nil {
		return false, nil
	}
	data := b[fragmentedHeader:]
	limit := p.fragBudget()
	if p.confirmed {
		limit += p.e.cfg.MaxMessage // the ReliableOrdered message, beyond ReliableUnordered's budget
	}
	if g.size+len(data) > p.e.cfg.MaxMessage || p.fragBytes+len(data) > limit {
		return false, errTooBig
	}
	g.parts[part] = copyPkt(data)
	g.size += len(data)
	p.fragBytes += len(data)
	g.got++
	if g.got < g.total {
		return true, nil
	}
	whole := getPkt(g.size)
	for i, f := range g.parts {
		whole.b = append(whole.b, f.b...)
		putPkt(f)
		g.parts[i] = nil
	}
	p.dropGroup(g)
	rx.deliver(m, whole.b, whole)
	return true, nil
}

func (p *Peer) dropGroup(g *fragGroup) {
	p.fragBytes -= g.size
	for i, x := range p.frags {
		if x == g {
			last := len(p.frags) - 1
			p.frags[i] = p.frags[last]
			p.frags[last] = nil
			p.frags = p.frags[:last]
			return
		}
	}
}

// releaseFrags frees every part held in reassembly.
func (p *Peer) releaseFrags() {
	for _, g := range p.frags {
		for i, f := range g.parts {
			putPkt(f)
			g.parts[i] = nil
		}
	}
	p.frags, p.fragBytes = nil, 0
}
