package balancer

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// Bounds of the event hub.
const (
	// eventBuffer is how many diffs one stream may have queued, and
	// eventQueueBytes how many bytes of them; a stream that falls further
	// behind is closed (its consumer resyncs). The diffs are shared by
	// every stream, so the streams together hold about eventQueueBytes.
	eventBuffer     = 256
	eventQueueBytes = 8 << 20
	// maxEventChanges bounds the rooms whose route changes one diff's
	// window logs, and maxDiffEvents the events one diff sends: past
	// either, every stream is closed instead (its consumer reconnects and
	// re-reads the lists), as for a stream that fell behind.
	maxEventChanges = 1 << 16
	maxDiffEvents   = 1 << 15
	// eventTick is the hub's catch-all diff interval (heartbeats, health
	// removals and staleness have no push of their own).
	eventTick = time.Second
	// eventMinInterval is the least time between two diffs, and
	// eventMaxShare bounds the diff loop's share of a core: after a diff
	// that took d the next one waits diffGap(d) from its start. A diff
	// costs the relays' view and the rooms changed since the last one
	// (BenchmarkEventSyncAfterAllocate), not the fleet's rooms; pacing
	// batches a burst of allocations into one diff. The pokes and ticks in
	// between make one diff when the wait is over, so an event lags by at
	// most that wait.
	eventMinInterval = 100 * time.Millisecond
	eventMaxShare    = 0.1
)

// diffGap is the least time from the start of a diff that took took to
// the start of the next.
func diffGap(took time.Duration) time.Duration {
	return max(eventMinInterval, time.Duration(float64(took)/eventMaxShare))
}

// eventHub fans fleet changes out to the GET /v1/events streams, only
// while a stream is open. A diff compares the relays' view (fleetView:
// instances, stats, the current registrations) with the last one and
// turns the log of room route changes since then (roomChanged, told by
// every roomEntry.setLive) into room events, so it costs what changed,
// not the fleet. Safe for concurrent use; logMu is taken under room
// leases and nothing is taken under it.
type eventHub struct {
	view func() fleetView // static: the relays' current state
	max  int              // static: concurrent streams
	// kick wakes the diff loop (cap 1: pokes coalesce).
	kick chan struct{}
	// watching is true while a stream is open (prev != nil): without one,
	// route changes are not logged and pokes do not wake the loop. Written
	// under mu, read without it.
	watching atomic.Bool
	// diffs counts the diffs made (sync while a stream is open), for
	// purrfly_balancer_event_diffs_total.
	diffs atomic.Uint64

	logMu    sync.Mutex
	changes  map[string]roomChange // guarded by logMu: routes changed since the last diff, by room name
	overflow bool                  // guarded by logMu: more than maxEventChanges rooms changed

	mu     sync.Mutex
	subs   map[*subscriber]struct{} // guarded by mu
	seq    uint64                   // guarded by mu: the last event's Seq
	prev   *fleetView               // guarded by mu: the last diffed view; nil while no stream is open
	closed bool                     // guarded by mu: Shutdown began
	onDrop func()                   // static after construction: counts dropped streams
}

// subscriber is one open stream.
type subscriber struct {
	ch   chan []byte   // encoded frames, those of one diff together; written under eventHub.mu, read by the stream
	done chan struct{} // closed (under eventHub.mu) when the stream must end
	// queued is the bytes in ch: added by sync, taken away by the stream
	// once written.
	queued atomic.Int64
}

func newEventHub(max int, view func() fleetView, onDrop func()) *eventHub {
	return &eventHub{view: view, max: max, kick: make(chan struct{}, 1), subs: make(map[*subscriber]struct{}),
		changes: make(map[string]roomChange), onDrop: onDrop}
}

// poke asks for a diff soon; it never blocks. Without an open stream
// there is nothing to diff, and it does nothing.
func (h *eventHub) poke() {
	if h == nil || !h.watching.Load() {
		return
	}
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// roomChanged logs that name's route went from old to cur (nil for none)
// and pokes, while a stream is open. A room changed again within one
// diff's window keeps its first old and takes the new cur. It is called
// under the room's lease (roomEntry.setLive), so a room's changes are
// logged in the order they were made; a change made after subscribe set
// watching (before its baseline view) is logged, so every change the
// baseline missed is diffed.
func (h *eventHub) roomChanged(name string, old, cur *roomRecord) {
	if h == nil || !h.watching.Load() {
		return
	}
	h.logMu.Lock()
	if c, ok := h.changes[name]; ok {
		c.cur = cur
		h.changes[name] = c
	} else if len(h.changes) < maxEventChanges {
		h.changes[name] = roomChange{old: old, cur: cur}
	} else {
		h.overflow = true
	}
	h.logMu.Unlock()
	h.poke()
}

// takeChanges empties the log and returns what it held.
func (h *eventHub) takeChanges() (map[string]roomChange, bool) {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	ch, over := h.changes, h.overflow
	h.changes, h.overflow = make(map[string]roomChange, min(len(ch), 1024)), false
	return ch, over
}

// streams is how many streams are open.
func (h *eventHub) streams() int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// diffCount is how many diffs were made (0 before the hub exists: the
// metrics are registered first).
func (h *eventHub) diffCount() float64 {
	if h == nil {
		return 0
	}
	return float64(h.diffs.Load())
}

// subscribe opens a stream, or answers ErrTooManyStreams (and ErrDraining
// once closed). The first stream takes the baseline view, so that every
// change after subscribe returns is an event. The stream's first frame is
// a stats event.
func (h *eventHub) subscribe() (*subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, wire.ErrDraining
	}
	if len(h.subs) >= h.max {
		return nil, wire.ErrTooManyStreams
	}
	if h.prev == nil {
		h.takeChanges()        // nothing logged before this stream matters
		h.watching.Store(true) // before the view: see roomChanged
		v := h.view()
		h.prev = &v
	}
	sub := &subscriber{ch: make(chan []byte, eventBuffer), done: make(chan struct{})}
	h.subs[sub] = struct{}{}
	st := h.prev.stats
	first := h.encodeLocked(wire.Event{Type: wire.EventStats, At: h.prev.at, Stats: &st})
	sub.queued.Add(int64(len(first)))
	sub.ch <- first
	return sub, nil
}

// unsubscribe ends a stream (idempotent).
func (h *eventHub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(sub)
}

func (h *eventHub) dropLocked(sub *subscriber) {
	if _, ok := h.subs[sub]; !ok {
		return
	}
	delete(h.subs, sub)
	close(sub.done)
	if len(h.subs) == 0 {
		h.prev = nil
		h.watching.Store(false)
		h.takeChanges()
	}
}

// close ends every stream and refuses new ones (Shutdown).
func (h *eventHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sub := range h.subs {
		h.dropLocked(sub)
	}
}

// sync diffs the current view and the logged room changes against the
// last view and sends the events to every stream, all the frames of one
// diff as one queue item (a relay leaving with thousands of rooms is one
// item, not thousands); a stream whose queue is full (eventBuffer items or
// eventQueueBytes) is closed. A diff past maxDiffEvents (or a log past
// maxEventChanges) closes every stream instead.
func (h *eventHub) sync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.prev == nil {
		return
	}
	h.diffs.Add(1)
	// The log first, then the view: a change logged in between waits for
	// the next diff, while every registration a logged change's route
	// points at is already in the view (a relay registers, then publishes).
	changes, overflow := h.takeChanges()
	cur := h.view()
	prev := *h.prev
	h.prev = &cur
	evs := diffInstances(prev, cur)
	var left []*relayEntry
	for r := range prev.current {
		if !cur.current[r] {
			left = append(left, r)
		}
	}
	if !overflow {
		evs = append(evs, diffRooms(prev, cur, changes, left)...)
	}
	if !statsEqual(prev.stats, cur.stats) {
		st := cur.stats
		evs = append(evs, wire.Event{Type: wire.EventStats, At: cur.at, Stats: &st})
	}
	if overflow || len(evs) > maxDiffEvents {
		for sub := range h.subs {
			h.dropped(sub)
		}
		return
	}
	if len(evs) == 0 {
		return
	}
	var batch []byte
	for _, ev := range evs {
		batch = append(batch, h.encodeLocked(ev)...)
	}
	for sub := range h.subs {
		if sub.queued.Load()+int64(len(batch)) > eventQueueBytes {
			h.dropped(sub)
			continue
		}
		select {
		case sub.ch <- batch:
			sub.queued.Add(int64(len(batch)))
		default:
			h.dropped(sub)
		}
	}
}

// dropped closes a stream that cannot follow, and counts it.
func (h *eventHub) dropped(sub *subscriber) {
	h.dropLocked(sub)
	if h.onDrop != nil {
		h.onDrop()
	}
}

// encodeLocked numbers ev and encodes it as one SSE frame.
func (h *eventHub) encodeLocked(ev wire.Event) []byte {
	h.seq++
	ev.Seq = h.seq
	data, _ := json.Marshal(ev)
	b := make([]byte, 0, len(data)+len(ev.Type)+32)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, ev.Type...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// eventLoop diffs the fleet for the event streams on pokes and every
// eventTick, paced (diffGap: what comes sooner after the last diff waits
// for a timer armed for the end of the gap), until ctx ends. The pacing
// runs on the injected clock; the diff's cost is the wall clock's.
func (s *Server) eventLoop(ctx context.Context) {
	tick := s.clock.NewTicker(eventTick)
	defer tick.Stop()
	var (
		next  time.Time        // the earliest start of the next diff
		pace  clock.Timer      // armed for next while something waits; nil when nothing does
		paceC <-chan time.Time // pace's channel, nil with it
	)
	defer func() {
		if pace != nil {
			pace.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.events.kick:
		case <-tick.C():
		case <-paceC:
			pace, paceC = nil, nil
		}
		if wait := next.Sub(s.clock.Now()); wait > 0 {
			if pace == nil {
				pace = s.clock.NewTimer(wait)
				paceC = pace.C()
			}
			// The clock may have passed next while the timer was armed
			// (for wait from then): then it is time now.
			if next.After(s.clock.Now()) {
				continue
			}
		}
		if pace != nil {
			pace.Stop()
			pace, paceC = nil, nil
		}
		start := s.clock.Now()
		t0 := time.Now() // wall clock: what the diff cost, not when it ran
		s.events.sync()
		next = start.Add(diffGap(time.Since(t0))) // wall clock: idem
	}
}
