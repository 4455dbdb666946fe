package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/devstack"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestVacantRoomReallocated: PurrNet reuses one room name per scene with a
// fresh allocation_id on every Play. Once the host has left (its clients
// were disconnected with it) the room is vacant: its players' to claim
// for one activation lease (host migration), after which the next Play's
// allocation takes the name over: new credentials, the old ones refused.
// A room whose host has not connected yet stays reserved.
func TestVacantRoomReallocated(t *testing.T) {
	const recovery = 300 * time.Millisecond
	s := startDev(t, func(o *devstack.Options) { o.ActivationLease = recovery })
	first, err := s.api.Allocate(tctx(t), "eu", "scene", client.NewAllocationID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.api.Allocate(tctx(t), "eu", "scene", client.NewAllocationID()); err == nil {
		t.Fatal("another allocation took a room whose host has not connected yet")
	}
	host, err := client.DialHost(tctx(t), first, "scene", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer host.CloseNow()
	joined, err := s.api.Join(tctx(t), "scene")
	if err != nil {
		t.Fatal(err)
	}
	cl := joinClient(t, s.api, "scene")
	expectConnected(t, host)
	testutil.Eventually(t, 2*time.Second, "scene to count 2 players", func() bool {
		return listAll(t, s.api)["scene"].ConnectedPlayers == 2
	})
	if _, err := s.api.Allocate(tctx(t), "eu", "scene", client.NewAllocationID()); err == nil {
		t.Fatal("another allocation took a room whose host is connected")
	}

	if err := host.Close(); err != nil {
		t.Fatal(err)
	}
	if st := expectClosed(t, clientRead(cl)); st != client.StatusNormalClosure {
		t.Fatalf("client closed with %d after its host left, want 1000", st)
	}
	testutil.Eventually(t, 2*time.Second, "scene at 0 players", func() bool {
		r, ok := listAll(t, s.api)["scene"]
		return ok && r.ConnectedPlayers == 0
	})

	// The next Play within the players' recovery window is refused; once
	// it has passed, a new allocation id gets the name.
	if _, err := s.api.Allocate(tctx(t), "eu", "scene", client.NewAllocationID()); !errors.Is(err, wire.ErrRoomTaken) {
		t.Fatalf("allocation within the recovery window: %v, want room_name_taken", err)
	}
	var second wire.Capability
	testutil.Eventually(t, 5*time.Second, "the recovery window to pass", func() bool {
		second, err = s.api.Allocate(tctx(t), "eu", "scene", client.NewAllocationID())
		return err == nil
	})
	if second.Secret == first.Secret {
		t.Fatal("the new allocation got the old host credential")
	}
	rejoined, err := s.api.Join(tctx(t), "scene")
	if err != nil {
		t.Fatal(err)
	}
	if rejoined.Secret == joined.Secret {
		t.Fatal("the new incarnation kept the old client credential")
	}
	if n := totalRooms(s.relays); n != 1 {
		t.Fatalf("relays hold %d rooms, want 1", n)
	}
	// The old credentials no longer authenticate; the new ones do.
	if _, err := client.DialHost(tctx(t), first, "scene", nil); !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("old host credential: %v, want ErrAuthFailed", err)
	}
	if _, err := client.DialClient(tctx(t), joined, "scene", nil); !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("old client credential: %v, want ErrAuthFailed", err)
	}
	h2, err := client.DialHost(tctx(t), second, "scene", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.CloseNow()
	c2 := joinClient(t, s.api, "scene")
	id := expectConnected(t, h2)[0]
	roundTrip(t, h2, c2, id, "second-play")
}
