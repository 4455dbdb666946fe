package limit

import (
	"sync"
	"time"
)

// Paced lets one of many events through per gap, counting the rest: a log
// line about refused calls says how many there were without a line each.
// The zero Paced with Gap set is ready; safe for concurrent use.
type Paced struct {
	Gap time.Duration // static: the least time between two events let through

	mu    sync.Mutex
	last  time.Time // guarded by mu: when the last event was let through
	since int       // guarded by mu: events since then, that one included
}

// Note counts one event at now and reports whether it is let through (the
// first, or the first a Gap after the last one let through) and, if so,
// how many events came since the last one let through, this one included.
func (p *Paced) Note(now time.Time) (through bool, since int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.since++
	if !p.last.IsZero() && now.Sub(p.last) < p.Gap {
		return false, 0
	}
	since, p.since, p.last = p.since, 0, now
	return true, since
}
