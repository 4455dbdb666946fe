package core

import (
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// removals records the removals the core queues for the balancer.
type removals struct {
	nopNotifier
	got []wire.Removal
}

func (n *removals) RoomRemoved(rem wire.Removal) { n.got = append(n.got, rem) }

// TestUnhostedRoomReleasedAtItsWindow: a room whose allocation's host has
// not connected within the host window is released at exactly the window
// (not the empty-room timeout), a client that came first is told the host
// left, the removal goes to the outbox, it is counted, and its slot is
// free for another allocation at once.
func TestUnhostedRoomReleasedAtItsWindow(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	c := testCore(t, clk)
	c.maxRooms = 1
	out := &removals{}
	c.SetNotifier(out)
	al, err := c.Allocate("squatted", "id")
	if err != nil {
		t.Fatal(err)
	}
	cl := c.NewConn(nil)
	feed(c, cl, authMsg(t, wire.Auth{RoomName: "squatted", ClientSecret: al.Pub.ClientSecret}))
	if _, err := c.Allocate("other", "id-2"); err != wire.ErrRelayFull {
		t.Fatalf("a second room at the bound: %v, want relay_full", err)
	}
	clk.Advance(c.hostWait - time.Nanosecond)
	c.Expire()
	if c.rooms.get("squatted") == nil || len(out.got) != 0 {
		t.Fatal("released before its window")
	}
	clk.Advance(time.Nanosecond)
	c.Expire()
	if c.rooms.get("squatted") != nil {
		t.Fatal("still held after exactly its window with no host")
	}
	if len(out.got) != 1 || out.got[0].Name != "squatted" || out.got[0].Epoch != al.Pub.Epoch {
		t.Fatalf("removals queued %+v, want the room's", out.got)
	}
	if r := cl.CloseReason(); r != ReasonHostLeft {
		t.Fatalf("its client closed for %v, want %v", r, ReasonHostLeft)
	}
	c.Leave(cl)
	if got := counterValue(c.m.hostNeverCame); got != 1 {
		t.Fatalf("purrfly_relay_rooms_unhosted_total %v, want 1", got)
	}
	if _, err := c.Allocate("other", "id-2"); err != nil {
		t.Fatalf("the freed slot: %v", err)
	}
	if err := c.ConsistencyCheck(); err != nil {
		t.Fatal(err)
	}
}

// TestHostWindowSparesHostedAndReservedRooms: the host window ends only
// rooms still awaiting their allocation's host. A hosted room stays; a
// room its host left with a client in (vacant: reserved for host
// migration's recovery) and one claimed for a promoted host whose lease
// then ran out (expired, claimable) keep their own windows, whatever the host window says; an adopted room
// (a handover) gets a window of its own from the adoption.
func TestHostWindowSparesHostedAndReservedRooms(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	c := testCore(t, clk)
	host := func(name string) (*Conn, Allocation) {
		al, err := c.Allocate(name, "id-"+name)
		if err != nil {
			t.Fatal(err)
		}
		h := c.NewConn(nil)
		feed(c, h, authMsg(t, wire.Auth{RoomName: name, ClientSecret: al.HostSecret}))
		return h, al
	}
	hosted, _ := host("hosted")
	vh, vacant := host("vacant")
	vc := c.NewConn(nil)
	feed(c, vc, authMsg(t, wire.Auth{RoomName: "vacant", ClientSecret: vacant.Pub.ClientSecret}))
	c.Leave(vh) // the client stays, isolated from nobody: the room is vacant
	ph, _ := host("claimed")
	r := c.rooms.get("claimed")
	r.mu.Lock()
	r.claimedLocked(clk.Now().Add(c.activationLease))
	r.mu.Unlock()

	clk.Advance(c.hostWait + time.Second)
	adopted := c.Adopt(wire.HandoverResponse{Name: "adopted", HostSecret: "h", ClientSecret: "c", AllocationID: "a"}, wire.Incarnation{Epoch: "e"})
	c.Expire()
	for name, want := range map[string]phase.Phase{"hosted": phase.Hosted, "vacant": phase.Vacant, "claimed": phase.Expired, "adopted": phase.Awaiting} {
		r := c.rooms.get(name)
		if r == nil {
			t.Fatalf("room %q released by the host window", name)
		}
		r.mu.Lock()
		p := r.phaseLocked()
		r.mu.Unlock()
		if p != want {
			t.Fatalf("room %q %v, want %v", name, p, want)
		}
	}
	clk.Advance(c.hostWait)
	c.Expire()
	adopted.mu.Lock()
	live := adopted.liveLocked()
	adopted.mu.Unlock()
	if c.rooms.get("adopted") != nil || live {
		t.Fatal("an adopted room whose host never came outlived its own window")
	}
	for _, cn := range []*Conn{hosted, vc, ph} {
		cn.Close(ReasonClientLeft)
		c.Leave(cn)
	}
}
