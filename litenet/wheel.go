package litenet

import "math"

// wheel is a socket's timer wheel: each peer sits in the slot of its next
// deadline (resend, ping, timeout, close grace, Disconnect repeat), so a
// tick touches only the peers due in it, not every peer, and the flusher
// sleeps until the earliest one instead of ticking idly (a client
// endpoint, one per socket, wakes about once a ping). Slots are tick
// long; a deadline past the wheel's span goes to the farthest slot and is
// put back when reached early. Everything is guarded by the socket's
// flushMu, as are the peers' wheel fields.
type wheel struct {
	tick  int64
	slots []*Peer // heads of doubly linked lists
	pos   int64   // the next tick index to process
	n     int     // peers in the wheel
	// lo is at most the earliest tick of any peer's slot, and exactly it
	// after a walk (math.MaxInt64: the wheel was found empty): due skips
	// the walk while now is before it, so a flush with nothing due reads
	// no slot. A client endpoint flushes on every message it sends or
	// reads, and its one peer's next deadline is a ping away; a walk on
	// each, or even one a tick, read slots that were cache misses across
	// a load generator's thousand endpoints. Finding lo again after a
	// walk reads the slots up to the next deadline once, in order.
	lo int64
	// sleepUntil is when the flusher plans to wake next (math.MaxInt64:
	// never, the wheel was empty; at first its first timer, a tick after
	// the start); a deadline before it wakes the flusher.
	sleepUntil int64
}

const wheelSlots = 1024

func newWheel(tick int64, now int64) *wheel {
	return &wheel{tick: tick, slots: make([]*Peer, wheelSlots), pos: now / tick, sleepUntil: now + tick, lo: math.MaxInt64}
}

// set puts p in the slot of deadline (0 removes it). It reports whether
// the deadline is earlier than sleepUntil, the flusher's planned wake-up
// (then the flusher must be woken to replan).
func (w *wheel) set(p *Peer, deadline int64) bool {
	if p.wheelSlot >= 0 {
		if deadline != 0 && deadline/w.tick == p.deadline/w.tick && p.deadline != 0 {
			p.deadline = deadline
			return false // same slot
		}
		w.remove(p)
	}
	p.deadline = deadline
	if deadline == 0 {
		return false
	}
	t := max(deadline/w.tick, w.pos)
	if t-w.pos >= wheelSlots {
		t = w.pos + wheelSlots - 1
	}
	i := int32(t % wheelSlots)
	w.lo = min(w.lo, t)
	p.wheelSlot = i
	p.wheelPrev, p.wheelNext = nil, w.slots[i]
	if w.slots[i] != nil {
		w.slots[i].wheelPrev = p
	}
	w.slots[i] = p
	w.n++
	return t*w.tick < w.sleepUntil
}

func (w *wheel) remove(p *Peer) {
	if p.wheelSlot < 0 {
		return
	}
	if p.wheelPrev != nil {
		p.wheelPrev.wheelNext = p.wheelNext
	} else {
		w.slots[p.wheelSlot] = p.wheelNext
	}
	if p.wheelNext != nil {
		p.wheelNext.wheelPrev = p.wheelPrev
	}
	p.wheelPrev, p.wheelNext, p.wheelSlot = nil, nil, -1
	w.n--
}

// due takes every peer whose deadline has come by now out of the wheel and
// appends it to dst. Peers in a reached slot whose deadline is later (put
// there from beyond the span) are put back.
func (w *wheel) due(now int64, dst []*Peer) []*Peer {
	end := now / w.tick
	if end < w.lo {
		// Every peer's slot is later: the slots up to end are empty.
		w.pos = max(w.pos, end+1)
		return dst
	}
	if end-w.pos >= wheelSlots {
		w.pos = end - wheelSlots + 1 // a long stall: every slot is visited once
	}
	for ; w.pos <= end; w.pos++ {
		i := w.pos % wheelSlots
		p := w.slots[i]
		if p == nil {
			continue
		}
		w.slots[i] = nil
		for p != nil {
			nx := p.wheelNext
			p.wheelPrev, p.wheelNext, p.wheelSlot = nil, nil, -1
			w.n--
			if p.deadline/w.tick <= end {
				dst = append(dst, p) // due within this tick: emit checks each timer itself
			} else {
				w.set(p, p.deadline) // beyond the span: parked again
			}
			p = nx
		}
	}
	w.lo = w.first()
	return dst
}

// first is the tick of the earliest non-empty slot (math.MaxInt64: the
// wheel is empty), scanning from lo, below which every slot is empty.
func (w *wheel) first() int64 {
	if w.n == 0 {
		return math.MaxInt64
	}
	for t := max(w.pos, w.lo); t < w.pos+wheelSlots; t++ {
		if w.slots[t%wheelSlots] != nil {
			return t
		}
	}
	return math.MaxInt64 // not reached: n counts the peers in the slots
}

// next is when the earliest non-empty slot falls due (0: the wheel is
// empty). It scans from lo, so only the flusher calls it, once before it
// sleeps.
func (w *wheel) next() int64 {
	w.lo = w.first()
	if w.lo == math.MaxInt64 {
		return 0
	}
	return w.lo * w.tick
}
