package relay

import (
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// TestRefusedPublicationEndsTheRoom: the balancer answers a live room's
// publication with conflict (it gave the name to another incarnation, as
// after a partition in which this relay was removed and a rival allocated
// the name elsewhere: found by `purrctl chaos --rival`). The room ends
// here, its host and players closed with 1012, so one name is never hosted
// on two machines once the relay hears the verdict; other rooms stay.
func TestRefusedPublicationEndsTheRoom(t *testing.T) {
	s, fb, _ := startRegistered(t)
	hs, cs := mustAllocate(t, s, "taken")
	ks, _ := mustAllocate(t, s, "kept")
	host := join(t, s, "taken", hs)
	player := join(t, s, "taken", cs)
	host.expectToHost(wire.ToHostConnected)
	other := join(t, s, "kept", ks)

	fb.mu.Lock()
	fb.pubStatus = map[string]wire.PublicationStatus{"taken": wire.PubConflict}
	fb.mu.Unlock()
	late := join(t, s, "taken", cs) // a count change: published at once, refused

	for name, p := range map[string]*peer{"host": host, "player": player, "late player": late} {
		if st := p.closed(); st != 1012 {
			t.Fatalf("%s closed with %d, want 1012 (room gone)", name, st)
		}
	}
	waitFor(t, "the refused room gone", func() bool { return s.core.rooms.get("taken") == nil })
	if s.core.rooms.get("kept") == nil {
		t.Fatal("a room the balancer did not refuse ended too")
	}
	_ = other.ws.CloseNow()
}
