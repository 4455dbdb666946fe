package litenet

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"

	"github.com/purrfly/purrfly/internal/lockrank"
)

const peerShards = 64

// peerTable maps addresses to peers, sharded so that readers of several
// sockets and the application's lookups do not meet on one lock.
type peerTable struct {
	shards [peerShards]struct {
		mu lockrank.RWMutex
		m  map[netip.AddrPort]*Peer // guarded by mu
	}
	n atomic.Int64
}

func (t *peerTable) init() {
	for i := range t.shards {
		t.shards[i].mu.Class = lockrank.LitePeerTable
		t.shards[i].m = make(map[netip.AddrPort]*Peer)
	}
}

func shardOf(a netip.AddrPort) int {
	ip := a.Addr().As16()
	h := binary.LittleEndian.Uint64(ip[8:]) ^ binary.LittleEndian.Uint64(ip[:8])*0x9e3779b97f4a7c15
	h ^= uint64(a.Port()) * 0xff51afd7ed558ccd
	h ^= h >> 29
	return int(h % peerShards)
}

func (t *peerTable) get(a netip.AddrPort) *Peer {
	s := &t.shards[shardOf(a)]
	s.mu.RLock()
	p := s.m[a]
	s.mu.RUnlock()
	return p
}

func (t *peerTable) put(p *Peer) {
	s := &t.shards[shardOf(p.addr)]
	s.mu.Lock()
	if _, ok := s.m[p.addr]; !ok {
		t.n.Add(1)
	}
	s.m[p.addr] = p
	s.mu.Unlock()
}

// remove drops p if it is still the entry for its address.
func (t *peerTable) remove(p *Peer) {
	s := &t.shards[shardOf(p.addr)]
	s.mu.Lock()
	if s.m[p.addr] == p {
		delete(s.m, p.addr)
		t.n.Add(-1)
	}
	s.mu.Unlock()
}

func (t *peerTable) all() []*Peer {
	out := make([]*Peer, 0, t.n.Load())
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for _, p := range s.m {
			out = append(out, p)
		}
		s.mu.RUnlock()
	}
	return out
}

// pendingTable counts the connections accepted but not yet confirmed, in
// total and per source address, and keeps those whose address has not
// proved it receives (unproven: no answer to the accept's cookie or to a
// ping's random sequence yet) in accept order, twice: in one list for the
// whole table and in one per source address. Those are the eviction
// candidates: at the per-source bound the oldest unproven entry of that
// source goes, at the total bound the oldest unproven entry of any, so
// requests forged from an address push out only unproven entries and
// never keep out a client that proves it receives there. The peers'
// pending fields are guarded by mu.
type pendingTable struct {
	mu       lockrank.Mutex
	n        int
	unproven peerList                   // oldest first (Peer.pendLinks)
	perIP    map[netip.Addr]*srcPending // guarded by mu
}

// srcPending is one source address's share of the pending table.
type srcPending struct {
	n        int32    // pending entries of the source, proven or not
	unproven peerList // its unproven entries, oldest first (Peer.srcLinks)
}

// peerLinks are a peer's links in one peerList, an intrusive list of
// peers; pendLink and srcLink pick which of its links a list uses.
type peerLinks struct{ prev, next *Peer }

type peerList struct{ head, tail *Peer }

func pendLink(p *Peer) *peerLinks { return &p.pendLinks }
func srcLink(p *Peer) *peerLinks  { return &p.srcLinks }

// pushBack appends p, through its links picked by link.
func (l *peerList) pushBack(p *Peer, link func(*Peer) *peerLinks) {
	lk := link(p)
	lk.prev, lk.next = l.tail, nil
	if l.tail != nil {
		link(l.tail).next = p
	} else {
		l.head = p
	}
	l.tail = p
}

// unlink takes p, which is in l, out of it.
func (l *peerList) unlink(p *Peer, link func(*Peer) *peerLinks) {
	lk := link(p)
	if lk.prev != nil {
		link(lk.prev).next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		link(lk.next).prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	lk.prev, lk.next = nil, nil
}

func (t *pendingTable) init() {
	t.mu.Class = lockrank.LitePending
	t.perIP = make(map[netip.Addr]*srcPending)
}

func (t *pendingTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// admit counts p as pending. At the source's bound its oldest unproven
// entry is evicted (returned, already out of this table) to make room, at
// the total bound the oldest unproven entry of any source; with nothing
// unproven to evict, p is refused.
func (t *pendingTable) admit(p *Peer, max, perIP int, proven bool) (evicted *Peer, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ip := p.addr.Addr()
	if src := t.perIP[ip]; src != nil && int(src.n) >= perIP {
		if src.unproven.head == nil {
			return nil, false
		}
		evicted = src.unproven.head
		t.removeLocked(evicted)
	} else if t.n >= max {
		if t.unproven.head == nil {
			return nil, false
		}
		evicted = t.unproven.head
		t.removeLocked(evicted)
	}
	src := t.perIP[ip]
	if src == nil {
		src = &srcPending{}
		t.perIP[ip] = src
	}
	t.n++
	src.n++
	p.pending = true
	if proven {
		return evicted, true
	}
	p.pendListed = true
	t.unproven.pushBack(p, pendLink)
	src.unproven.pushBack(p, srcLink)
	return evicted, true
}

// proven takes p off the eviction lists: its address proved it receives.
func (t *pendingTable) proven(p *Peer) {
	t.mu.Lock()
	t.unlistLocked(p)
	t.mu.Unlock()
}

func (t *pendingTable) remove(p *Peer) {
	t.mu.Lock()
	t.removeLocked(p)
	t.mu.Unlock()
}

func (t *pendingTable) removeLocked(p *Peer) {
	if !p.pending {
		return
	}
	t.unlistLocked(p)
	p.pending = false
	t.n--
	ip := p.addr.Addr()
	if src := t.perIP[ip]; src != nil {
		if src.n--; src.n <= 0 {
			delete(t.perIP, ip)
		}
	}
}

func (t *pendingTable) unlistLocked(p *Peer) {
	if !p.pendListed {
		return
	}
	t.unproven.unlink(p, pendLink)
	if src := t.perIP[p.addr.Addr()]; src != nil {
		src.unproven.unlink(p, srcLink)
	} else {
		p.srcLinks = peerLinks{}
	}
	p.pendListed = false
}
