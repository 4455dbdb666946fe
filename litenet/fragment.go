package litenet

import "encoding/binary"

// Reassembly bounds. A peer holds at most maxFragGroups messages in
// reassembly at once (LiteNetLib allows 64; two channels fragment, and one
// message at a time on each is what a real client sends), each of at most
// maxFragments parts and Config.MaxMessage bytes.
const (
	maxFragGroups = 4
	maxFragments  = 256
)

// fragGroup is one message being reassembled. Guarded by the Peer's mu.
type fragGroup struct {
	id    uint16
	ch    uint8
	total int
	got   int
	size  int
	parts []*pkt // by part index; each holds the fragment's payload
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
			return false, nil
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
	if g.size+len(data) > p.e.cfg.MaxMessage {
		return false, errTooBig
	}
	g.parts[part] = copyPkt(data)
	g.size += len(data)
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
	p.frags = nil
}
