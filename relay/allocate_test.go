package relay

import (
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// TestAllocateReplayWhileDraining: a draining relay refuses new rooms, but
// an exact replay of an allocation whose answer was lost still gets the
// original capability.
func TestAllocateReplayWhileDraining(t *testing.T) {
	s := startRelay(t, Options{})
	a, status, e := allocate(t, s, "room", "id-1")
	if status != http.StatusOK {
		t.Fatalf("allocate: %d %v", status, e)
	}
	s.core.SetDraining()
	b, status, e := allocate(t, s, "room", "id-1")
	if status != http.StatusOK || !b.Replayed || b.Capability != a.Capability || b.Publication != a.Publication {
		t.Fatalf("exact replay while draining: %d %v %+v", status, e, b)
	}
	if _, status, e := allocate(t, s, "room", "id-2"); status != http.StatusConflict || e.Code != wire.ErrRoomTaken.Code {
		t.Fatalf("another id for a live room while draining: %d %v", status, e)
	}
	if _, status, e := allocate(t, s, "new", "id-3"); status != http.StatusServiceUnavailable || e.Code != wire.ErrDraining.Code {
		t.Fatalf("a new room while draining: %d %v", status, e)
	}
}

// TestAllocateTakesOverAVacantRoom: once its host has left, nobody is
// connected and its players' recovery window (one activation lease) is
// over, a room name may be allocated again under a new allocation id: a
// new incarnation (epoch, credentials) replaces it and the old one goes to
// the unregister outbox. A room whose host never connected stays reserved,
// and so does one a client is still connected to.
func TestAllocateTakesOverAVacantRoom(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := startRelay(t, Options{Clock: clk})
	first, _, _ := allocate(t, s, "scene", "play-1")
	if _, status, _ := allocate(t, s, "scene", "play-2"); status != http.StatusConflict {
		t.Fatalf("a room whose host never connected: %d, want 409", status)
	}
	host := join(t, s, "scene", first.Capability.Secret)
	cl := join(t, s, "scene", first.Publication.ClientSecret)
	host.ExpectToHost(wire.ToHostConnected)
	if _, status, _ := allocate(t, s, "scene", "play-2"); status != http.StatusConflict {
		t.Fatalf("a room with its host: %d, want 409", status)
	}
	_ = host.WS.Close(websocket.StatusNormalClosure, "")
	if code := cl.Closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("client close status %v", code)
	}
	waitFor(t, "the vacant room", func() bool { return s.Stats().Connections == 0 })
	r := s.core.Room("scene")
	p, _ := r.Publication()
	vacant := p.Vacant
	if !vacant {
		t.Fatal("a room whose host left does not publish vacant")
	}

	// A client that comes back makes it occupied again.
	back := join(t, s, "scene", first.Publication.ClientSecret)
	if _, status, _ := allocate(t, s, "scene", "play-2"); status != http.StatusConflict {
		t.Fatalf("a room whose host left but a client is back: %d, want 409", status)
	}
	_ = back.WS.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the client to leave", func() bool { return s.Stats().Connections == 0 })

	// Within the recovery window the room is its players' to claim.
	if _, status, _ := allocate(t, s, "scene", "play-2"); status != http.StatusConflict {
		t.Fatalf("a vacant room within its recovery window: %d, want 409", status)
	}
	clk.Advance(DefaultActivationLease)
	second, status, e := allocate(t, s, "scene", "play-2")
	if status != http.StatusOK || second.Replayed {
		t.Fatalf("take over a vacant room: %d %v", status, e)
	}
	p1, p2 := first.Publication, second.Publication
	if p2.Epoch == p1.Epoch || p2.ClientSecret == p1.ClientSecret || second.Capability.Secret == first.Capability.Secret ||
		p2.AllocationID != "play-2" || p2.Vacant || p2.Revision != 1 {
		t.Fatalf("new incarnation %+v after %+v", p2, p1)
	}
	if s.Stats().Rooms != 1 {
		t.Fatalf("rooms %d, want 1", s.Stats().Rooms)
	}
	// The old credentials are gone, the new ones work.
	for _, old := range []string{first.Capability.Secret, first.Publication.ClientSecret} {
		p := wstest.Dial(t, s.WSURL())
		if got := p.Auth("scene", old); got != wire.AuthFailed {
			t.Fatalf("old credential: reply %d, want 4", got)
		}
	}
	join(t, s, "scene", second.Capability.Secret)
	// The replay of the new allocation replays; the old id is now another id.
	if again, _, _ := allocate(t, s, "scene", "play-2"); !again.Replayed || again.Publication.Epoch != p2.Epoch {
		t.Fatalf("replay of the new allocation: %+v", again)
	}
	if _, status, _ := allocate(t, s, "scene", "play-1"); status != http.StatusConflict {
		t.Fatalf("the old allocation id: %d, want 409", status)
	}
}

// TestDrainingRelayReleasesAVacantRoom: a draining relay creates no room,
// so a new allocation of a vacant, empty room's name is answered draining
// (the balancer then places it elsewhere) and the vacant room is let go
// (its removal goes to the outbox) rather than refused as taken.
func TestDrainingRelayReleasesAVacantRoom(t *testing.T) {
	s := startRelay(t, Options{})
	first, _, _ := allocate(t, s, "scene", "play-1")
	host := join(t, s, "scene", first.Capability.Secret)
	cl := join(t, s, "scene", first.Publication.ClientSecret)
	host.ExpectToHost(wire.ToHostConnected)
	_ = host.WS.Close(websocket.StatusNormalClosure, "")
	if code := cl.Closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("client close status %v", code)
	}
	waitFor(t, "the vacant room", func() bool { return s.Stats().Connections == 0 })

	s.core.SetDraining()
	if _, status, e := allocate(t, s, "scene", "play-2"); status != http.StatusServiceUnavailable || e.Code != wire.ErrDraining.Code {
		t.Fatalf("a vacant room's name while draining: %d %v, want 503 draining", status, e)
	}
	if s.Stats().Rooms != 0 {
		t.Fatalf("rooms %d after releasing the vacant one, want 0", s.Stats().Rooms)
	}
	if p := wstest.Dial(t, s.WSURL()); p.Auth("scene", first.Capability.Secret) != wire.AuthFailed {
		t.Fatal("the released room still takes its host")
	}
}
