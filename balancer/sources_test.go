package balancer

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// allocateFrom is POST /allocate_ws from the source address src (its
// Fly-Client-IP).
func allocateFrom(h *harness, src, name, allocationID string) *wire.Error {
	h.t.Helper()
	st, b, _ := h.do(http.MethodPost, "/allocate_ws", map[string]string{wire.HeaderFlyClientIP: src,
		"name": name, "region": "eu", "allocation_id": allocationID}, nil)
	return decodeAnswer(h.t, st, b, nil)
}

// TestRoomsPerSourceCap: one address holds at most MaxRoomsPerSource live
// rooms through /allocate_ws (360 addresses took every relay's MAX_ROOMS in
// 2.8 s, each within the allocation rate): past it, an allocation of a new
// room is 429 too_many_rooms (retryable) and counted, while another
// address allocates as ever, the exact retry of a room it holds is
// answered, a room that closes gives its place back, and a matchmaker's
// reservation (POST /v1/rooms) is not counted.
func TestRoomsPerSourceCap(t *testing.T) {
	h, _ := adminHarness(t, nil, func(o *Options) {
		guardQuiet(o)
		o.MaxRoomsPerSource = 3
		o.ClientIPHeader = wire.HeaderFlyClientIP
	})
	r := newFakeRelay(t, "eu")
	r.register(h)
	const a, b = "198.51.100.7", "203.0.113.9"
	for i := range 3 {
		noErr(t, allocateFrom(h, a, "a-"+strconv.Itoa(i), "id-a-"+strconv.Itoa(i)))
	}
	err := allocateFrom(h, a, "a-3", "id-a-3")
	wantCode(t, err, wire.ErrTooManyRooms.Code)
	if err.Status != http.StatusTooManyRequests || !err.Retryable {
		t.Fatalf("refusal %+v, want 429 and retryable", err)
	}
	if r.allocCalls.Load() != 3 {
		t.Fatalf("the relay was asked %d times, want 3: a refused allocation asks no relay", r.allocCalls.Load())
	}
	noErr(t, allocateFrom(h, a, "a-1", "id-a-1")) // the exact retry of a room it holds
	noErr(t, allocateFrom(h, b, "b-0", "id-b-0")) // another address
	st, body, _ := h.do(http.MethodPost, wire.PathRooms, bearer(adminKeyA), []byte(`{"name":"mm-0","allocationId":"mm-0"}`))
	if st != http.StatusOK {
		t.Fatalf("a reservation from the admin API: %d %s", st, body)
	}
	if src := h.s.st.rooms.sources; src.sources.Load() != 2 || src.atCap.Load() != 1 || src.refused.Load() != 1 {
		t.Fatalf("sources %d, at the cap %d, refused %d; want 2, 1, 1", src.sources.Load(), src.atCap.Load(), src.refused.Load())
	}
	// a-0 ends at its relay: a's place comes back.
	r.mu.Lock()
	epoch := r.rooms["a-0"].epoch
	r.mu.Unlock()
	wantStatuses(t, r.unregister(h, wire.Removal{Name: "a-0", Epoch: epoch, Revision: 1}), wire.RemApplied)
	noErr(t, allocateFrom(h, a, "a-3", "id-a-3"))
	wantCode(t, allocateFrom(h, a, "a-4", "id-a-4"), wire.ErrTooManyRooms.Code)
	metrics := scrape(t, h)
	for _, want := range []string{`purrfly_balancer_allocations_total{result="too_many_rooms"} 2`,
		"purrfly_balancer_room_sources 2", "purrfly_balancer_room_sources_at_max 1"} {
		if !contains(metrics, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	if b := statsBounds(t, h, adminKeyA).Sources; b.Max != 3 || b.Sources != 2 || b.AtMax != 1 || b.Refused != 2 {
		t.Fatalf("/v1/stats roomsPerSource %+v, want max 3, 2 sources, 1 at the max, 2 refused", b)
	}
}

// TestRoomsPerSourceOff: a negative MaxRoomsPerSource turns the cap off.
func TestRoomsPerSourceOff(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxRoomsPerSource = -1 })
	r := newFakeRelay(t, "eu")
	r.register(h)
	for i := range DefaultMaxRoomsPerSource + 5 {
		if _, err := h.allocate("r-"+strconv.Itoa(i), "eu", "id-"+strconv.Itoa(i)); err != nil {
			t.Fatalf("allocation %d with the cap off: %v", i, err)
		}
	}
	if n := h.s.st.rooms.sources.sources.Load(); n != 0 {
		t.Fatalf("%d sources counted with the cap off", n)
	}
}

// scrape is the balancer's /metrics text.
func scrape(t *testing.T, h *harness) []byte {
	t.Helper()
	st, body, _ := h.do(http.MethodGet, "/metrics", nil, nil)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d %s", st, body)
	}
	return body
}

// TestTakenNameIsTakenWhateverTheBounds: another allocation id for a live
// room is room_name_taken, also from an address at its cap or while memory
// is short: it would make no room, and the caller learns why.
func TestTakenNameIsTakenWhateverTheBounds(t *testing.T) {
	var heap atomic.Int64
	h := newHarness(t, func(o *Options) {
		o.MaxRoomsPerSource = 1
		o.ClientIPHeader = wire.HeaderFlyClientIP
		o.MemoryBudget = 1 << 30
		o.readHeap = heap.Load
	})
	r := newFakeRelay(t, "eu")
	r.register(h)
	noErr(t, allocateFrom(h, "198.51.100.7", "room", "id-1"))
	wantCode(t, allocateFrom(h, "198.51.100.7", "room", "id-2"), wire.ErrRoomTaken.Code)
	heap.Store(1 << 30)
	wantCode(t, allocateFrom(h, "203.0.113.9", "room", "id-3"), wire.ErrRoomTaken.Code)
	wantCode(t, allocateFrom(h, "203.0.113.9", "other", "id-4"), wire.ErrBalancerFull.Code)
}

// TestStatsCountUnhostedReleases: the rooms each relay released because
// their host never came (squatted or abandoned allocations), as its
// heartbeats report them, are summed in /v1/stats over the relays
// registered now.
func TestStatsCountUnhostedReleases(t *testing.T) {
	h, _ := adminHarness(t, nil, nil)
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	for _, r := range []*fakeRelay{a, b} {
		r.register(h)
	}
	if n := statsBounds(t, h, adminKeyA).Unhosted; n != 0 {
		t.Fatalf("roomsReleasedUnhosted %d before any release, want 0", n)
	}
	var resp wire.RegisterResponse
	noErr(t, a.post(h, wire.PathRegister, wire.RegisterRequest{Relay: a.info, UnhostedReleased: 3}, &resp))
	noErr(t, b.post(h, wire.PathRegister, wire.RegisterRequest{Relay: b.info, UnhostedReleased: 2}, &resp))
	if n := statsBounds(t, h, adminKeyA).Unhosted; n != 5 {
		t.Fatalf("roomsReleasedUnhosted %d, want 5 (3 + 2)", n)
	}
}
