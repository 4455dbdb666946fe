package relay

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// TestCapacityRooms: Capacity.MaxRooms (RELAY_MAX_ROOMS) bounds the rooms
// like MaxRooms: past it a new room is relay_full (503, retryable: the
// balancer tries another relay), an exact replay still answers, and the
// lower of the two bounds wins.
func TestCapacityRooms(t *testing.T) {
	s := startRelay(t, Options{MaxRooms: 100, Capacity: wire.Capacity{MaxRooms: 2}})
	mustAllocate(t, s, "one")
	mustAllocate(t, s, "two")
	if _, status, e := allocate(t, s, "three", "id-3"); status != http.StatusServiceUnavailable || e.Code != wire.ErrRelayFull.Code || !e.Retryable {
		t.Fatalf("a third room at capacity 2: %d %v", status, e)
	}
	if _, status, _ := allocate(t, s, "one", "alloc-one"); status != http.StatusOK {
		t.Fatalf("a replay at capacity: %d", status)
	}
	if got := s.relayInfo().Capacity; got != (wire.Capacity{MaxRooms: 2}) {
		t.Fatalf("reported capacity %+v, want maxRooms 2", got)
	}
	// A capacity above MaxRooms: MaxRooms is what the relay enforces and reports.
	big := startRelay(t, Options{MaxRooms: 3, Capacity: wire.Capacity{MaxRooms: 50}})
	if got := big.relayInfo().Capacity.MaxRooms; got != 3 {
		t.Fatalf("reported maxRooms %d, want MaxRooms' 3", got)
	}
}

// TestCapacityConnections: at Capacity.MaxConnections connections a new
// room is relay_full, but players still join the rooms the relay holds
// (a game placed here must stay joinable), and a room frees up when a
// connection leaves.
func TestCapacityConnections(t *testing.T) {
	s := startRelay(t, Options{Capacity: wire.Capacity{MaxConnections: 2}})
	hs, cs := mustAllocate(t, s, "game")
	host := join(t, s, "game", hs)
	cl := join(t, s, "game", cs)
	host.ExpectToHost(wire.ToHostConnected)
	_, status, e := allocate(t, s, "another", "id-a")
	if status != http.StatusServiceUnavailable || e.Code != wire.ErrRelayFull.Code || !strings.Contains(e.Message, "connections") {
		t.Fatalf("a new room at 2/2 connections: %d %v", status, e)
	}
	late := join(t, s, "game", cs) // a third player of the room placed here
	host.ExpectToHost(wire.ToHostConnected)
	if _, status, _ := allocate(t, s, "game", "alloc-game"); status != http.StatusOK {
		t.Fatalf("a replay at capacity: %d", status)
	}
	_ = late
	_ = cl
	waitFor(t, "three connections", func() bool { return s.Stats().Connections == 3 })
	if got := s.relayInfo().Capacity.MaxConnections; got != 2 {
		t.Fatalf("reported maxConnections %d", got)
	}
}

// TestLabelsReported: Options.Labels travel in the registration, copied
// (the caller's map is not shared), and bad labels or a negative capacity
// are refused by New with a clear error.
func TestLabelsReported(t *testing.T) {
	fb := newFakeBalancer(t)
	labels := map[string]string{"tier": "pro", "zone": "eu-1"}
	s := startRelay(t, Options{BalancerURL: fb.srv.URL, Labels: labels, Capacity: wire.Capacity{MaxRooms: 7, MaxConnections: 70}})
	waitFor(t, "first heartbeat", func() bool { return s.reg.beats.Load() >= 1 })
	labels["tier"] = "changed"
	reg := fb.lastRegister()
	if !maps.Equal(reg.Relay.Labels, map[string]string{"tier": "pro", "zone": "eu-1"}) || reg.Relay.Capacity != (wire.Capacity{MaxRooms: 7, MaxConnections: 70}) {
		t.Fatalf("registered %+v %+v", reg.Relay.Labels, reg.Relay.Capacity)
	}
	for _, o := range []Options{
		{Secret: testSecret, Labels: map[string]string{"bad key": "v"}},
		{Secret: testSecret, Labels: map[string]string{"k": ""}},
		{Secret: testSecret, Capacity: wire.Capacity{MaxRooms: -1}},
	} {
		if _, err := New(o); err == nil || !strings.HasPrefix(err.Error(), "invalid relay options: ") {
			t.Errorf("New(%+v %+v): %v, want invalid relay options", o.Labels, o.Capacity, err)
		}
	}
}
