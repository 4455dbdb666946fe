package litenet

import (
	"encoding/binary"
	"unsafe"
)

// Reassembly bounds. A peer holds at most maxFragGroups messages in
// reassembly at once (LiteNetLib's 64: a sender's ReliableUnordered window
// may carry 32 messages' fragments, ReliableOrdered one at a time), each of
// at most maxFragments parts and Config.MaxMessage bytes, and at most
// fragBudget in all (less before the application confirms the peer: all
// it may send then is an authentication message).
//
// The budget counts what reassembly holds on the heap, not the payload it
// carries: a part is a pooled buffer of its size class plus its pkt, a
// group its struct, its slot in the peer's list and its slice of one
// pointer per part; so empty or one-byte parts are not free. The budget is
// stated in messages of full fragments (messageCost): two of MaxMessage
// (confirmed), one of 16 KiB before.
//
// A ReliableUnordered fragment that would pass those bounds is refused
// before it is acknowledged, so the sender sends it again once groups
// complete: nothing acknowledged is ever dropped.
const (
	maxFragGroups          = 64
	maxFragments           = 256
	unconfirmedFragMessage = 16 << 10
	// maxFragmentPart is the most a fragment carries: LiteNetLib sends no
	// datagram past MaxPacketSize. A longer one is dropped.
	maxFragmentPart = MaxPacketSize - fragmentedHeader
	// unconfirmedHeld bounds the out-of-order packets an unconfirmed
	// peer's ReliableOrdered channel holds; past it they are refused
	// unacknowledged (sent again later).
	unconfirmedHeld = 8
)

// What reassembly holds, in heap bytes.
var (
	partOverhead  = int(unsafe.Sizeof(pkt{}))
	groupOverhead = int(unsafe.Sizeof(fragGroup{})) + int(unsafe.Sizeof((*fragGroup)(nil)))
	partSlot      = int(unsafe.Sizeof((*pkt)(nil)))
)

// partCost is what a part of n bytes holds: its buffer's class and its pkt.
func partCost(n int) int { return pktClassSize(n) + partOverhead }

// groupCost is what a group of total parts holds before any part.
func groupCost(total int) int { return groupOverhead + total*partSlot }

// messageCost is what a message of n bytes holds in reassembly, sent as
// LiteNetLib sends it: in fragments of fragmentPayload bytes.
func messageCost(n int) int {
	parts := max(1, (n+fragmentPayload-1)/fragmentPayload)
	return groupCost(parts) + parts*partCost(fragmentPayload)
}

// fragBudget is the heap reassembly may hold for the peer.
func (p *Peer) fragBudget() int {
	if !p.confirmed {
		return messageCost(unconfirmedFragMessage)
	}
	return 2 * messageCost(p.e.cfg.MaxMessage)
}

// fragGroup is one message being reassembled. Guarded by the Peer's mu.
type fragGroup struct {
	id    uint16
	ch    uint8
	total int
	got   int
	size  int    // payload bytes held
	cost  int    // heap bytes held (groupCost and its parts' partCost)
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
	total := int(binary.LittleEndian.Uint16(b[8:]))
	if total == 0 || total > maxFragments || len(b)-fragmentedHeader > maxFragmentPart {
		return true // refused by addFragment, after the ack
	}
	cost := groupCost(total) + partCost(len(b)-fragmentedHeader)
	return len(p.frags) < maxFragGroups && p.fragCost+cost <= p.fragBudget()
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
	data := b[fragmentedHeader:]
	if len(data) > maxFragmentPart {
		return false, nil
	}
	var g *fragGroup
	for _, x := range p.frags {
		if x.id == id {
			g = x
			break
		}
	}
	cost := partCost(len(data))
	if g == nil {
		cost += groupCost(total)
	} else if g.total != total || g.ch != b[3] || g.parts[part] != nil {
		return false, nil
	}
	limit := p.fragBudget()
	if p.confirmed {
		limit += messageCost(p.e.cfg.MaxMessage) // the ReliableOrdered message, beyond ReliableUnordered's budget
	}
	if p.fragCost+cost > limit || g != nil && g.size+len(data) > p.e.cfg.MaxMessage {
		return false, errTooBig
	}
	if g == nil {
		if len(p.frags) >= maxFragGroups {
			return false, errTooBig // only a ReliableOrdered group can get here: one at a time is all a sender makes
		}
		g = &fragGroup{id: id, ch: b[3], total: total, parts: make([]*pkt, total)}
		p.frags = append(p.frags, g)
	}
	g.parts[part] = copyPkt(data)
	g.size += len(data)
	g.cost += cost
	p.fragCost += cost
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
	p.fragCost -= g.cost
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
	p.frags, p.fragCost = nil, 0
}
