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
	// eventBuffer is how many encoded events one stream may have queued;
	// a stream that falls further behind is closed (its consumer resyncs).
	eventBuffer = 256
	// eventTick is the hub's catch-all diff interval (heartbeats, health
	// removals and staleness have no push of their own).
	eventTick = time.Second
	// eventMinInterval is the least time between two diffs, and
	// eventMaxShare bounds the diff loop's share of a core: after a diff
	// that took d the next one waits diffGap(d) from its start. A diff
	// takes the whole fleet's view (about 20 ms and 11 MB at 10,000 rooms,
	// BenchmarkEventSync): one per allocation, back to back while
	// allocations keep coming, would take a core for as long as a
	// dashboard is open. The pokes and ticks in between make one diff when
	// the wait is over, so an event lags by at most that wait.
	eventMinInterval = 100 * time.Millisecond
	eventMaxShare    = 0.1
)

// diffGap is the least time from the start of a diff that took took to
// the start of the next.
func diffGap(took time.Duration) time.Duration {
	return max(eventMinInterval, time.Duration(float64(took)/eventMaxShare))
}

// eventHub fans fleet changes out to the GET /v1/events streams. It
// diffs the fleet's semantic state (fleetView) on every poke and tick,
// but only while a stream is open. Safe for concurrent use.
type eventHub struct {
	view func() fleetView // static: the current state
	max  int              // static: concurrent streams
	// kick wakes the diff loop (cap 1: pokes coalesce).
	kick chan struct{}
	// watching is true while a stream is open (prev != nil): a poke
	// without one would wake the diff loop for nothing, once for every
	// allocation. Written under mu, read by poke without it.
	watching atomic.Bool
	// diffs counts the diffs made (sync while a stream is open), for
	// purrfly_balancer_event_diffs_total.
	diffs atomic.Uint64

	mu     sync.Mutex
	subs   map[*subscriber]struct{} // guarded by mu
	seq    uint64                   // guarded by mu: the last event's Seq
	prev   *fleetView               // guarded by mu: the last diffed state; nil while no stream is open
	closed bool                     // guarded by mu: Shutdown began
	onDrop func()                   // static after construction: counts dropped streams
}

// subscriber is one open stream.
type subscriber struct {
	ch   chan []byte   // encoded frames, those of one diff together; written under eventHub.mu, read by the stream
	done chan struct{} // closed (under eventHub.mu) when the stream must end
}

func newEventHub(max int, view func() fleetView, onDrop func()) *eventHub {
	return &eventHub{view: view, max: max, kick: make(chan struct{}, 1), subs: make(map[*subscriber]struct{}), onDrop: onDrop}
}

// poke asks for a diff soon; it never blocks. Without an open stream
// there is nothing to diff, and it does nothing: a change made after
// subscribe set watching (before its baseline view) pokes, so every
// change the baseline missed is diffed.
func (h *eventHub) poke() {
	if h == nil || !h.watching.Load() {
		return
	}
	select {
	case h.kick <- struct{}{}:
	default:
	}
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
// once closed). The first stream takes the baseline state, so that every
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
		h.watching.Store(true) // before the view: see poke
		v := h.view()
		h.prev = &v
	}
	sub := &subscriber{ch: make(chan []byte, eventBuffer), done: make(chan struct{})}
	h.subs[sub] = struct{}{}
	st := h.prev.stats
	sub.ch <- h.encodeLocked(wire.Event{Type: wire.EventStats, At: h.prev.at, Stats: &st})
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

// sync diffs the current state against the last one and sends the
// events to every stream, all the frames of one diff as one queue item (a
// relay leaving with thousands of rooms is one item, not thousands: only
// a stream eventBuffer diffs behind is behind); a stream whose queue is
// full is closed.
func (h *eventHub) sync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.prev == nil {
		return
	}
	h.diffs.Add(1)
	cur := h.view()
	evs := diffFleet(*h.prev, cur)
	h.prev = &cur
	if len(evs) == 0 {
		return
	}
	var batch []byte
	for _, ev := range evs {
		batch = append(batch, h.encodeLocked(ev)...)
	}
	for sub := range h.subs {
		select {
		case sub.ch <- batch:
		default:
			h.dropLocked(sub)
			if h.onDrop != nil {
				h.onDrop()
			}
		}
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
