package balancer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// nextEvent reads frames until an event of typ (comments and other
// events are skipped), failing after 5 s.
func nextEvent(t *testing.T, s *client.EventStream, typ string) wire.Event {
	t.Helper()
	type res struct {
		f   client.Frame
		err error
	}
	deadline := time.After(5 * time.Second)
	for {
		ch := make(chan res, 1)
		go func() { f, err := s.Next(); ch <- res{f, err} }()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("waiting for %s: %v", typ, r.err)
			}
			if r.f.Event.Type == typ {
				return r.f.Event
			}
		case <-deadline:
			t.Fatalf("no %s event within 5 s", typ)
		}
	}
}

func openEvents(t *testing.T, a *client.Admin) *client.EventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := a.Events(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = s.Close() })
	return s
}

// TestEvents: a stream starts with stats, then tells a room allocated
// through /allocate_ws, its update, a drain, a close and a relay joining,
// each as it happens, and stats after each change.
func TestEvents(t *testing.T) {
	h, _ := adminHarness(t, nil, nil)
	eu := newFakeRelay(t, "eu")
	eu.register(h)
	a := h.admin(adminKeyA)
	s := openEvents(t, a)
	if ev := nextEvent(t, s, wire.EventStats); ev.Stats == nil || ev.Stats.Relays != 1 || ev.Seq == 0 {
		t.Fatalf("first event %+v", ev)
	}

	_, aerr := h.allocate("live-room", "eu", "a1")
	noErr(t, aerr)
	ev := nextEvent(t, s, wire.EventRoomCreate)
	if ev.Room == nil || ev.Room.Name != "live-room" || ev.Room.BootID != eu.boot() || ev.Room.Phase != wire.RoomWaiting {
		t.Fatalf("room.create %+v", ev)
	}
	if st := nextEvent(t, s, wire.EventStats); st.Stats.Rooms != 1 || st.Seq <= ev.Seq {
		t.Fatalf("stats after the create: %+v", st)
	}

	eu.mu.Lock()
	epoch := eu.rooms["live-room"].epoch
	eu.mu.Unlock()
	wantStatuses(t, eu.publish(h, wire.Publication{Name: "live-room", Epoch: epoch, Revision: 2, Connections: 2, ClientSecret: "c", AllocationID: "a1"}), wire.PubApplied)
	// Diffs are paced (diffGap: at least eventMinInterval apart, more
	// after a slow one); a second of the test's clock is past any gap a
	// diff of this fleet leaves, even under the race detector.
	h.clk.Advance(eventTick)
	if ev := nextEvent(t, s, wire.EventRoomUpdate); ev.Room.Connections != 2 || ev.Room.Phase != wire.RoomActive {
		t.Fatalf("room.update %+v", ev)
	}

	if _, err := a.Drain(t.Context(), eu.boot()); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(eventTick)
	if ev := nextEvent(t, s, wire.EventInstanceDrain); ev.Instance == nil || ev.Instance.BootID != eu.boot() || ev.Instance.Status != wire.InstanceDraining {
		t.Fatalf("instance.drain %+v", ev)
	}
	if _, err := a.Undrain(t.Context(), eu.boot()); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(eventTick)
	nextEvent(t, s, wire.EventInstanceUndrain)

	if _, err := a.CloseRoom(t.Context(), "live-room"); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(eventTick)
	if ev := nextEvent(t, s, wire.EventRoomClose); ev.Room == nil || ev.Room.Name != "live-room" {
		t.Fatalf("room.close %+v", ev)
	}

	us := newFakeRelay(t, "us")
	us.register(h)
	h.clk.Advance(eventTick) // a heartbeat has no push: the tick finds it
	if ev := nextEvent(t, s, wire.EventInstanceJoin); ev.Instance.BootID != us.boot() {
		t.Fatalf("instance.join %+v", ev)
	}
	h.clk.Advance(61 * time.Second) // eu and us miss two heartbeats
	if ev := nextEvent(t, s, wire.EventInstanceStale); !ev.Instance.Stale {
		t.Fatalf("instance.stale %+v", ev)
	}
}

// TestEventsPing: a quiet stream gets ": ping" every EventPing of the
// injected clock.
func TestEventsPing(t *testing.T) {
	h, _ := adminHarness(t, nil, nil)
	s := openEvents(t, h.admin(adminKeyA))
	nextEvent(t, s, wire.EventStats)
	for range 2 {
		h.clk.Advance(DefaultEventPing)
		f, err := s.Next()
		if err != nil || f.Comment != "ping" {
			t.Fatalf("after 15 s: %+v %v, want a ping comment", f, err)
		}
	}
}

// TestEventsCap: streams past MaxEventStreams are 429 too_many_streams;
// one ends, another may open.
func TestEventsCap(t *testing.T) {
	h, _ := adminHarness(t, nil, func(o *Options) { o.MaxEventStreams = 2 })
	a := h.admin(adminKeyA)
	first := openEvents(t, a)
	nextEvent(t, first, wire.EventStats)
	second := openEvents(t, a)
	nextEvent(t, second, wire.EventStats)
	_, err := a.Events(t.Context())
	if !wantWire(err, wire.ErrTooManyStreams) {
		t.Fatalf("third stream: %v, want 429 too_many_streams", err)
	}
	_ = first.Close()
	waitFor(t, "the closed stream to end", func() bool { return h.s.events.streams() == 1 })
	nextEvent(t, openEvents(t, a), wire.EventStats)
}

// TestEventsQueryKey: with SSEQueryKey, ?key= opens a stream (EventSource
// cannot send headers); a wrong one is the usual 401.
func TestEventsQueryKey(t *testing.T) {
	h, _ := adminHarness(t, nil, func(o *Options) { o.SSEQueryKey = true })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.s.URL()+wire.PathEvents+"?key="+adminKeyA, nil)
	resp, err := h.client.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("?key= stream: %v %v", resp, err)
	}
	nextEvent(t, client.NewEventStream(resp.Body), wire.EventStats)
	resp.Body.Close()
	st, body, _ := h.do(http.MethodGet, wire.PathEvents+"?key=wrong-key-0123456789", nil, nil)
	wantErrBody(t, st, body, http.StatusUnauthorized, wire.ErrUnauthorized.Code)
	// Only on the event stream.
	st, body, _ = h.do(http.MethodGet, wire.PathStats+"?key="+adminKeyA, nil, nil)
	wantErrBody(t, st, body, http.StatusUnauthorized, wire.ErrUnauthorized.Code)
}

// TestEventsShutdown: Shutdown ends open streams at once instead of
// waiting for its deadline.
func TestEventsShutdown(t *testing.T) {
	h, _ := adminHarness(t, nil, nil)
	s := openEvents(t, h.admin(adminKeyA))
	nextEvent(t, s, wire.EventStats)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := h.s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with an open stream: %v", err)
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("stream after Shutdown: %v, want its end", err)
	}
}

// hubRelay is a registration for the hub tests, and hubRoute a route of
// it.
func hubRelay(boot string) *relayEntry {
	return &relayEntry{info: wire.RelayInfo{BootID: boot, Endpoint: "http://" + boot, Region: "eu"}}
}

func hubRoute(rel *relayEntry, epoch string) *roomRecord {
	return &roomRecord{relay: rel, epoch: epoch, revision: 1, clientSecret: "cs"}
}

// hubView is a view in which rels are current.
func hubView(rels ...*relayEntry) func() fleetView {
	return func() fleetView {
		v := fleetView{instances: map[string]wire.Instance{}, current: map[*relayEntry]bool{}}
		for _, r := range rels {
			v.current[r] = true
		}
		return v
	}
}

// TestEventHubDropsSlow: a stream that falls eventBuffer diffs behind is
// closed, and the others keep theirs.
func TestEventHubDropsSlow(t *testing.T) {
	rel := hubRelay("b")
	drops := 0
	hub := newEventHub(4, hubView(rel), func() { drops++ })
	slow, err := hub.subscribe()
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := hub.subscribe()
	for n := 1; n <= eventBuffer; n++ {
		hub.roomChanged("r"+strconv.Itoa(n), nil, hubRoute(rel, "e")) // a create each
		hub.sync()
		for len(fast.ch) > 0 {
			fast.queued.Add(-int64(len(<-fast.ch)))
		}
	}
	select {
	case <-slow.done:
	default:
		t.Fatal("the slow stream was not closed")
	}
	select {
	case <-fast.done:
		t.Fatal("the reading stream was closed")
	default:
	}
	if drops != 1 || hub.streams() != 1 {
		t.Fatalf("drops %d, streams %d", drops, hub.streams())
	}
	hub.close()
	if _, err := hub.subscribe(); !errors.Is(err, wire.ErrDraining) {
		t.Fatalf("subscribe after close: %v", err)
	}
}

// A stream that keeps up is never dropped for the size of one change: a
// relay leaving with more rooms than the queue holds reaches it whole, a
// room.close for each of its rooms, in name order, in one diff.
func TestEventHubKeepsAReaderThroughABigChange(t *testing.T) {
	rel := hubRelay("b")
	current := []*relayEntry{rel}
	hub := newEventHub(4, func() fleetView { return hubView(current...)() }, nil)
	for i := 0; i < 3*eventBuffer; i++ {
		e := &roomEntry{name: fmt.Sprintf("r%04d", i)}
		e.live.Store(hubRoute(rel, "e"))
		rel.index.add(e)
	}
	drops := 0
	hub.onDrop = func() { drops++ }
	sub, err := hub.subscribe()
	if err != nil {
		t.Fatal(err)
	}
	<-sub.ch // the first stats
	current = nil
	hub.sync()
	select {
	case <-sub.done:
		t.Fatal("a caught-up stream was dropped by one big change")
	default:
	}
	batch := string(<-sub.ch)
	if frames := strings.Count(batch, "event: room.close\n"); frames != 3*eventBuffer || drops != 0 {
		t.Fatalf("%d room.close frames (want %d), %d drops", frames, 3*eventBuffer, drops)
	}
	if a, b := strings.Index(batch, `"r0000"`), strings.Index(batch, `"r0767"`); a < 0 || b < a {
		t.Fatal("the closes are not in name order")
	}
}

// TestEventHubBoundsWhatItHolds: the log of changes holds at most
// maxEventChanges rooms and a stream's queue at most eventQueueBytes; past
// either, the streams are closed (their consumers reconnect and re-read)
// instead of the hub holding more.
func TestEventHubBoundsWhatItHolds(t *testing.T) {
	rel := hubRelay("b")
	drops := 0
	hub := newEventHub(4, hubView(rel), func() { drops++ })
	sub, _ := hub.subscribe()
	for i := range maxEventChanges + 1 {
		hub.roomChanged("r"+strconv.Itoa(i), nil, hubRoute(rel, "e"))
	}
	hub.logMu.Lock()
	logged, over := len(hub.changes), hub.overflow
	hub.logMu.Unlock()
	if logged != maxEventChanges || !over {
		t.Fatalf("%d changes logged (overflow %v), want %d and the overflow noted", logged, over, maxEventChanges)
	}
	hub.sync()
	select {
	case <-sub.done:
	default:
		t.Fatal("a stream past the log's bound was not closed")
	}
	// A stream whose queue holds eventQueueBytes is closed before a diff
	// would pass it, however few diffs that is.
	sub, _ = hub.subscribe()
	sub.queued.Add(eventQueueBytes - 10)
	hub.roomChanged("one-more", nil, hubRoute(rel, "e"))
	hub.sync()
	select {
	case <-sub.done:
	default:
		t.Fatal("a stream past its queue's bytes was not closed")
	}
	if drops != 2 {
		t.Fatalf("%d drops counted, want 2", drops)
	}
}

// TestEventDiffCostsTheChanges: a diff with one room changed allocates the
// same at 100 rooms as at 10,000 (it diffed a view of every room before).
func TestEventDiffCostsTheChanges(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	allocs := func(rooms int) float64 {
		s, f := newMemSetup(t)
		fillRooms(t, s, f, rooms)
		sub, err := s.events.subscribe()
		if err != nil {
			t.Fatal(err)
		}
		defer s.events.unsubscribe(sub)
		e := s.st.rooms.get(benchRoomName(0))
		rec := e.live.Load()
		i := 0
		return testing.AllocsPerRun(20, func() {
			i++
			next := *rec
			next.connections = i
			s.events.roomChanged(e.name, rec, &next)
			s.events.sync()
			<-sub.ch
		})
	}
	small, big := allocs(100), allocs(10000)
	if big > small+2 {
		t.Fatalf("a diff of one change allocates %.0f times at 10,000 rooms, %.0f at 100", big, small)
	}
}

// TestEventDiffsPaced: while a stream is open, allocations one after
// another at one instant are not diffed one by one (each diff is a view of
// the whole fleet): the pokes after a diff wait for the end of its gap
// and then come as one diff, which still tells every room's creation.
func TestEventDiffsPaced(t *testing.T) {
	h, _ := adminHarness(t, nil, nil)
	eu := newFakeRelay(t, "eu")
	eu.register(h)
	s := openEvents(t, h.admin(adminKeyA))
	nextEvent(t, s, wire.EventStats)
	base := h.s.events.diffs.Load()
	const rooms = 20
	for i := range rooms {
		_, err := h.allocate(fmt.Sprintf("paced-%d", i), "eu", fmt.Sprintf("a%d", i))
		noErr(t, err)
		// The loop has taken this allocation's poke before the next one.
		waitFor(t, "the diff loop to take the poke", func() bool { return len(h.s.events.kick) == 0 })
	}
	h.clk.Advance(eventTick)
	created := map[string]bool{}
	for len(created) < rooms {
		created[nextEvent(t, s, wire.EventRoomCreate).Room.Name] = true
	}
	if d := h.s.events.diffs.Load() - base; d > 2 {
		t.Fatalf("%d allocations made %d diffs, want at most 2 (one at once, one paced)", rooms, d)
	}
}

// TestDiffGap: diffs are at least eventMinInterval apart, and a slow one
// keeps the loop within eventMaxShare of a core.
func TestDiffGap(t *testing.T) {
	for _, tc := range []struct{ took, want time.Duration }{
		{0, eventMinInterval},
		{5 * time.Millisecond, eventMinInterval},
		{20 * time.Millisecond, 200 * time.Millisecond},
		{200 * time.Millisecond, 2 * time.Second},
	} {
		if got := diffGap(tc.took); got != tc.want {
			t.Errorf("diffGap(%v) = %v, want %v", tc.took, got, tc.want)
		}
	}
}

// TestEventsRelayLeavesAndReturns: a relay removed by the health check is
// an instance.leave and a room.close for each of its rooms, in name order,
// though none of them changed (they are read from the relay's own index);
// the same boot back, republishing them, is an instance.join and a
// room.create for each.
func TestEventsRelayLeavesAndReturns(t *testing.T) {
	h, _ := adminHarness(t, nil, guardQuiet)
	eu := newFakeRelay(t, "eu")
	eu.register(h)
	rooms := []wire.Publication{pub("c-room", "e1", 1, 0), pub("a-room", "e1", 1, 2), pub("b-room", "e1", 1, 1)}
	eu.publish(h, rooms...)
	s := openEvents(t, h.admin(adminKeyA))
	nextEvent(t, s, wire.EventStats)

	eu.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, DefaultHealthFailures)
	h.clk.Advance(eventTick)
	nextEvent(t, s, wire.EventInstanceLeave)
	for _, want := range []string{"a-room", "b-room", "c-room"} {
		if ev := nextEvent(t, s, wire.EventRoomClose); ev.Room.Name != want {
			t.Fatalf("room.close of %q, want %q next", ev.Room.Name, want)
		}
	}

	eu.set(func(f *fakeRelay) { f.pingFail = false })
	eu.register(h)
	eu.publish(h, rooms...)
	h.clk.Advance(eventTick)
	nextEvent(t, s, wire.EventInstanceJoin)
	for _, want := range []string{"a-room", "b-room", "c-room"} {
		if ev := nextEvent(t, s, wire.EventRoomCreate); ev.Room.Name != want || ev.Room.BootID != eu.boot() {
			t.Fatalf("room.create %+v, want %q of the returned relay next", ev.Room, want)
		}
	}
}
