package relay

import (
	"testing"

	"github.com/purrfly/purrfly/internal/wstest"
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
	host.ExpectToHost(wire.ToHostConnected)
	other := join(t, s, "kept", ks)
	// The joins' count publications go out on the registrar's own time:
	// the balancer's verdict changes only once they have arrived, so that
	// only the late player's is refused.
	waitFor(t, "the joins' counts published", func() bool {
		return fb.lastConnections("taken") == 2 && fb.lastConnections("kept") == 1
	})

	fb.mu.Lock()
	fb.pubStatus = map[string]wire.PublicationStatus{"taken": wire.PubConflict}
	fb.mu.Unlock()
	late := join(t, s, "taken", cs) // a count change: published at once, refused

	for name, p := range map[string]*wstest.Peer{"host": host, "player": player, "late player": late} {
		if st := p.Closed(); st != 1012 {
			t.Fatalf("%s closed with %d, want 1012 (room gone)", name, st)
		}
	}
	waitFor(t, "the refused room gone", func() bool { return s.core.Room("taken") == nil })
	if s.core.Room("kept") == nil {
		t.Fatal("a room the balancer did not refuse ended too")
	}
	_ = other.WS.CloseNow()
}

// lastConnections is the connection count of name's last publication (-1
// if none arrived).
func (f *fakeBalancer) lastConnections(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.publishes) - 1; i >= 0; i-- {
		for _, p := range f.publishes[i].Rooms {
			if p.Name == name {
				return p.Connections
			}
		}
	}
	return -1
}
