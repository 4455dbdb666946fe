package wstransport

import (
	"net"

	"github.com/purrfly/purrfly/internal/lockrank"
)

// pendingPool bounds the connections between their upgrade and their
// authentication: perSource from one source address, total in all. A
// source at its own bound is refused; a full pool makes room by closing
// its oldest connection that has not sent its first message, as litenet
// pushes out its oldest unproven peer. So a flood of upgrades that never
// authenticate, from however many addresses, cannot keep a newcomer from
// another address out: it only pushes out its own connections, and the
// newcomer's stays until total newer upgrades have come after it. A
// connection whose first message has arrived (being authenticated, or
// forwarded to the holder of its room) is counted until its handler is
// done but never pushed out; a pool full of those refuses.
//
// Ownership: perSource and total are static; the rest is guarded by mu,
// a leaf of the lock order (internal/lockrank), never held across I/O.
type pendingPool struct {
	perSource, total int // static; 0: no bound

	mu       lockrank.Mutex
	bySource map[string]int // sources with a count > 0
	n        int
	// head (oldest) and tail (newest) of the connections that may be
	// pushed out, linked through pendingSlot.prev and next.
	head, tail *pendingSlot
}

// pendingSlot is one connection's place in the pool. Its fields are
// guarded by the pool's mu.
type pendingSlot struct {
	src        string
	prev, next *pendingSlot
	listed     bool     // in the list: may be pushed out
	counted    bool     // in the counts: neither released nor pushed out
	evicted    bool     // pushed out: its socket is (or will be, once bound) closed
	nc         net.Conn // the socket, once upgraded (bind); nil before
}

func newPendingPool(perSource, total int) *pendingPool {
	return &pendingPool{perSource: perSource, total: total, bySource: make(map[string]int),
		mu: lockrank.Mutex{Class: lockrank.WSPending}}
}

// acquire counts a new connection from src, pushing out the oldest one
// that may be pushed out when the pool is full. It returns nil when src is
// at its own bound, or the pool is full of connections that may not be
// pushed out; evicted reports whether one was.
func (p *pendingPool) acquire(src string) (s *pendingSlot, evicted bool) {
	p.mu.Lock()
	if p.perSource > 0 && p.bySource[src] >= p.perSource {
		p.mu.Unlock()
		return nil, false
	}
	var victim net.Conn
	if p.total > 0 && p.n >= p.total {
		old := p.head
		if old == nil {
			p.mu.Unlock()
			return nil, false
		}
		p.uncountLocked(old)
		old.evicted, evicted, victim = true, true, old.nc
	}
	s = &pendingSlot{src: src, counted: true}
	p.bySource[src]++
	p.n++
	p.linkLocked(s)
	p.mu.Unlock()
	if victim != nil {
		_ = victim.Close() // its reader ends at once; its handler releases nothing more
	}
	return s, evicted
}

// bind gives s its socket once upgraded, and reports false when s was
// pushed out meanwhile (the caller then drops the socket).
func (p *pendingPool) bind(s *pendingSlot, nc net.Conn) bool {
	if s == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s.nc = nc
	return !s.evicted
}

// arrived says s's first message is in: it is not pushed out any more.
func (p *pendingPool) arrived(s *pendingSlot) {
	if s == nil {
		return
	}
	p.mu.Lock()
	p.unlinkLocked(s)
	p.mu.Unlock()
}

// release gives s's place back (nothing if it was pushed out).
func (p *pendingPool) release(s *pendingSlot) {
	p.mu.Lock()
	p.uncountLocked(s)
	s.nc = nil
	p.mu.Unlock()
}

// count is how many connections the pool holds.
func (p *pendingPool) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// uncountLocked takes s out of the counts and the list.
func (p *pendingPool) uncountLocked(s *pendingSlot) {
	p.unlinkLocked(s)
	if !s.counted {
		return
	}
	s.counted = false
	p.n--
	if p.bySource[s.src] <= 1 {
		delete(p.bySource, s.src)
	} else {
		p.bySource[s.src]--
	}
}

// linkLocked appends s to the list, as the newest.
func (p *pendingPool) linkLocked(s *pendingSlot) {
	s.prev, s.next, s.listed = p.tail, nil, true
	if p.tail != nil {
		p.tail.next = s
	} else {
		p.head = s
	}
	p.tail = s
}

// unlinkLocked takes s out of the list, if it is in.
func (p *pendingPool) unlinkLocked(s *pendingSlot) {
	if !s.listed {
		return
	}
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		p.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		p.tail = s.prev
	}
	s.prev, s.next, s.listed = nil, nil, false
}
