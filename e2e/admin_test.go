package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/devstack"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// e2eAdminKey is the stacks' admin key here.
const e2eAdminKey = "e2e-admin-key-0123456789abcdef-0123456789"

// TestAdminFleetOverRealRelays: against a devstack of real relays, an
// event stream sees a room allocated by a game host; the admin lists it;
// DELETE /v1/rooms/{name} closes the host's and the client's sockets with
// 1000 at the relay and frees the name (the stream sees room.close, /join
// fails, the name can be allocated again); POST /v1/rooms reserves a room
// a host and a client can use.
func TestAdminFleetOverRealRelays(t *testing.T) {
	st := startDev(t, func(o *devstack.Options) { o.AdminKey = e2eAdminKey })
	admin := client.NewAdmin(st.bal.URL(), e2eAdminKey)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, err := admin.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	wantEvent := func(typ, room string) wire.Event {
		t.Helper()
		type res struct {
			f   client.Frame
			err error
		}
		deadline := time.After(stepTimeout)
		for {
			ch := make(chan res, 1)
			go func() { f, err := events.Next(); ch <- res{f, err} }()
			select {
			case r := <-ch:
				if r.err != nil {
					t.Fatalf("waiting for %s of %s: %v", typ, room, r.err)
				}
				if r.f.Event.Type == typ && (room == "" || r.f.Event.Room != nil && r.f.Event.Room.Name == room) {
					return r.f.Event
				}
			case <-deadline:
				t.Fatalf("no %s of %s", typ, room)
			}
		}
	}
	if ev := wantEvent(wire.EventStats, ""); ev.Stats.Relays != 2 {
		t.Fatalf("first stats %+v", ev.Stats)
	}

	o := allocHost(t, st.api, "eu", "admin-e2e")
	ev := wantEvent(wire.EventRoomCreate, "admin-e2e")
	if ev.Room.Region != "eu" {
		t.Fatalf("room.create %+v", ev.Room)
	}
	cl := joinClient(t, st.api, "admin-e2e")
	expectConnected(t, o.host)
	testutil.Eventually(t, stepTimeout, "the room's two connections", func() bool {
		rm, err := admin.Room(tctx(t), "admin-e2e")
		return err == nil && rm.Connections == 2 && rm.Phase == wire.RoomActive
	})
	list, err := admin.Rooms(tctx(t), client.RoomFilter{Region: "eu"})
	if err != nil || list.Total != 1 || list.Rooms[0].Name != "admin-e2e" {
		t.Fatalf("rooms in eu: %+v %v", list, err)
	}

	out, err := admin.CloseRoom(tctx(t), "admin-e2e")
	if err != nil || !out.Closed || out.Connections != 2 {
		t.Fatalf("close: %+v %v", out, err)
	}
	if _, err := o.host.Next(tctx(t)); client.CloseStatus(err) != 1000 {
		t.Fatalf("host after the close: %v, want close 1000", err)
	}
	if _, err := cl.Recv(tctx(t)); client.CloseStatus(err) != 1000 {
		t.Fatalf("client after the close: %v, want close 1000", err)
	}
	wantEvent(wire.EventRoomClose, "admin-e2e")
	if _, err := st.api.Join(tctx(t), "admin-e2e"); !errors.Is(err, wire.ErrRoomNotFound) {
		t.Fatalf("join after the close: %v", err)
	}
	if again, err := admin.CloseRoom(tctx(t), "admin-e2e"); err != nil || again.Closed {
		t.Fatalf("second close: %+v %v", again, err)
	}
	allocHost(t, st.api, "eu", "admin-e2e") // the name is free everywhere
	wantEvent(wire.EventRoomCreate, "admin-e2e")

	res, err := admin.Reserve(tctx(t), wire.ReserveRequest{Name: "matchmade", Region: "us", AllocationID: "mm-1"})
	if err != nil || res.Room.Region != "us" {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	h, err := client.DialHost(tctx(t), res.Host, "matchmade", nil)
	if err != nil {
		t.Fatalf("host of the reservation: %v", err)
	}
	defer h.CloseNow()
	c, err := client.DialClient(tctx(t), res.Client, "matchmade", nil)
	if err != nil {
		t.Fatalf("client of the reservation: %v", err)
	}
	defer c.CloseNow()
	expectConnected(t, h)
}
