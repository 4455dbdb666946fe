package balancer

import (
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// TestReadoptedRouteKeepsItsAllocationID: the allocation id is fixed for an
// incarnation, also across a health-check removal: when the returning boot
// republishes the orphaned incarnation without it (older relays omit it),
// at the revision held or a newer one, the route keeps the id, so
// PurrNet's exact allocation retry still replays and another id still
// cannot take the room.
func TestReadoptedRouteKeepsItsAllocationID(t *testing.T) {
	h := newHarness(t, guardQuiet)
	r := newFakeRelay(t, "eu")
	r.register(h)
	first := map[string]wire.Capability{}
	for _, name := range []string{"same", "newer"} {
		c, err := h.allocate(name, "eu", "play-"+name)
		noErr(t, err)
		first[name] = c
	}
	r.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, DefaultHealthFailures)
	r.set(func(f *fakeRelay) { f.pingFail = false })
	r.register(h)
	for name, bump := range map[string]uint64{"same": 0, "newer": 1} {
		room := guardRoom(t, r, name)
		wantStatuses(t, r.publish(h, wire.Publication{Name: name, Epoch: room.epoch, Revision: room.revision + bump, ClientSecret: room.clientSecret}),
			wire.PubApplied)
		again, err := h.allocate(name, "eu", "play-"+name)
		noErr(t, err)
		if again != first[name] {
			t.Fatalf("%s: exact replay after the relay came back answered %+v, first answer %+v", name, again, first[name])
		}
		_, err = h.allocate(name, "eu", "another-play")
		wantCode(t, err, wire.ErrRoomTaken.Code)
	}
}
