package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/relay"
	"github.com/purrfly/purrfly/wire"
)

// TestAllocateNewAndLegacy: a new client's POST and an older client's GET
// both get a usable host capability on a relay of the requested region, and
// the host authenticates with it.
func TestAllocateNewAndLegacy(t *testing.T) {
	s := startDev(t, nil)
	servers, err := s.api.Servers(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	wsPort, udpPort, udp1Port := map[string]int{}, map[string]int{}, map[string]int{}
	for _, sv := range servers {
		wsPort[sv.Region], udpPort[sv.Region], udp1Port[sv.Region] = sv.WebSocketsPort, sv.UDPPortV2, sv.UDPPort
	}
	for _, tc := range []struct {
		name, region string
		alloc        func(ctx context.Context, region, name string) (wire.Capability, error)
	}{
		{"post", "eu", func(ctx context.Context, region, name string) (wire.Capability, error) {
			return s.api.Allocate(ctx, region, name, client.NewAllocationID())
		}},
		{"legacy-get", "us", s.api.AllocateLegacy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room := "alloc-" + tc.name
			c, err := tc.alloc(tctx(t), tc.region, room)
			if err != nil {
				t.Fatalf("allocate: %v", err)
			}
			if c.Host == "" { // an older answer may leave host out: take it from /servers
				c.Host = "127.0.0.1"
			}
			if c.Secret == "" || c.Port != wsPort[tc.region] || c.UDPPortV2 != udpPort[tc.region] || c.UDPPort != udp1Port[tc.region] || c.UDPPort == 0 || c.SSL {
				t.Fatalf("capability %+v: want a secret, port %d and UDP ports %d, %d (1.x) of region %s, no ssl",
					redact(c), wsPort[tc.region], udpPort[tc.region], udp1Port[tc.region], tc.region)
			}
			h, err := client.DialHost(tctx(t), c, room, nil)
			if err != nil {
				t.Fatalf("host with the allocated capability: %v", err)
			}
			defer h.CloseNow()
			r, ok := listAll(t, s.api)[room]
			if !ok || r.Region != tc.region {
				t.Fatalf("/list has %+v for %s, want region %s", r, room, tc.region)
			}
		})
	}
}

// TestAllocateAnswerFields: both answers carry, by name, every field the
// PurrNet client reads: older clients {ssl, secret, port, udpPort,
// udpPortV2}, new ones also host.
func TestAllocateAnswerFields(t *testing.T) {
	s := startDev(t, nil, "eu")
	for _, tc := range []struct {
		method  string
		headers map[string]string
	}{
		{"GET", map[string]string{"region": "eu", "name": "fields-get"}},
		{"POST", map[string]string{"region": "eu", "name": "fields-post", "allocation_id": client.NewAllocationID()}},
	} {
		a := do(t, tc.method, s.bal.URL()+"/allocate_ws", tc.headers, nil)
		var m map[string]any
		if a.status != 200 || json.Unmarshal(a.body, &m) != nil {
			t.Fatalf("%s /allocate_ws: %d %.200s", tc.method, a.status, a.body)
		}
		for _, f := range []string{"ssl", "secret", "port", "udpPort", "udpPortV2", "host"} {
			if _, ok := m[f]; !ok {
				t.Fatalf("%s /allocate_ws answer lacks %q: %s", tc.method, f, a.body)
			}
		}
		if _, ok := m["ssl"].(bool); !ok {
			t.Fatalf("%s /allocate_ws: ssl is not a bool: %s", tc.method, a.body)
		}
	}
}

func redact(c wire.Capability) wire.Capability {
	if c.Secret != "" {
		c.Secret = "<set>"
	}
	return c
}

// TestAllocateRegionFallback: the requested region wins (case-insensitive);
// an unknown or empty region falls back to a relay that exists instead of
// failing; only a balancer with no relay at all refuses (503 no_relays).
func TestAllocateRegionFallback(t *testing.T) {
	s := startDev(t, nil)
	port := map[string]int{"eu": portOf(t, s.relays[0].WSURL()), "us": portOf(t, s.relays[1].WSURL())}
	for i, tc := range []struct{ region, want string }{
		{"eu", "eu"}, {"us", "us"}, {"EU", "eu"}, {"mars", ""}, {"", ""},
	} {
		c, err := s.api.Allocate(tctx(t), tc.region, roomName("region", i), client.NewAllocationID())
		if err != nil {
			t.Fatalf("allocate in %q: %v", tc.region, err)
		}
		if tc.want != "" && c.Port != port[tc.want] {
			t.Fatalf("allocate in %q landed on port %d, want %s (%d)", tc.region, c.Port, tc.want, port[tc.want])
		}
		if c.Port != port["eu"] && c.Port != port["us"] {
			t.Fatalf("allocate in %q landed on port %d, not a relay", tc.region, c.Port)
		}
	}
	lonely := newBalancer(t, 0, nil)
	_, err := newAPI(t, lonely.URL()).Allocate(tctx(t), "eu", "nowhere", client.NewAllocationID())
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != "no_relays" || we.Status != http.StatusServiceUnavailable || !we.Retryable {
		t.Fatalf("allocate with no relay registered: %v, want 503 no_relays (retryable)", err)
	}
}

// TestAllocateExactReplay: the same allocation_id returns the same
// capability and leaves one room.
func TestAllocateExactReplay(t *testing.T) {
	s := startDev(t, nil)
	allocID := client.NewAllocationID()
	first, err := s.api.Allocate(tctx(t), "eu", "replayed", allocID)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		again, err := s.api.Allocate(tctx(t), "eu", "replayed", allocID)
		if err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
		if again != first {
			t.Fatalf("replay %d answered %+v, want the original %+v", i, redact(again), redact(first))
		}
	}
	// A replay asking for another region still lands on the same room.
	if again, err := s.api.Allocate(tctx(t), "us", "replayed", allocID); err != nil || again != first {
		t.Fatalf("replay with another region = %+v, %v; want the original", redact(again), err)
	}
	if l, err := s.api.List(tctx(t), 0); err != nil || l.Total != 1 {
		t.Fatalf("/list = %+v, %v; want one room", l, err)
	}
	if n := totalRooms(s.relays); n != 1 {
		t.Fatalf("relays hold %d rooms, want 1", n)
	}
	// A replay once the room is in use answers the same capability and
	// disturbs nobody.
	h, err := client.DialHost(tctx(t), first, "replayed", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.CloseNow()
	cl := joinClient(t, s.api, "replayed")
	id := expectConnected(t, h)[0]
	if again, err := s.api.Allocate(tctx(t), "eu", "replayed", client.NewAllocationID()); err == nil || again == first {
		t.Fatalf("another allocation id got the live room: %v", err)
	}
	if again, err := s.api.Allocate(tctx(t), "eu", "replayed", allocID); err != nil || again != first {
		t.Fatalf("replay of a room in use = %+v, %v; want the original", redact(again), err)
	}
	roundTrip(t, h, cl, id, "after-replay")
	testutil.Eventually(t, 2*time.Second, "replayed to count 2 players", func() bool {
		return listAll(t, s.api)["replayed"].ConnectedPlayers == 2
	})
}

func totalRooms(rs []*relay.Server) int {
	n := 0
	for _, r := range rs {
		n += r.Stats().Rooms
	}
	return n
}

// TestAllocateConflict: another allocation_id (or a legacy GET) for a live
// room is 409 room_name_taken, and the room keeps its first owner.
func TestAllocateConflict(t *testing.T) {
	s := startDev(t, nil)
	p := newPair(t, s.api, "eu", "taken")
	for _, tc := range []struct {
		name  string
		alloc func() (wire.Capability, error)
	}{
		{"other-id", func() (wire.Capability, error) {
			return s.api.Allocate(tctx(t), "eu", "taken", client.NewAllocationID())
		}},
		{"other-region", func() (wire.Capability, error) {
			return s.api.Allocate(tctx(t), "us", "taken", client.NewAllocationID())
		}},
		{"legacy-get", func() (wire.Capability, error) { return s.api.AllocateLegacy(tctx(t), "eu", "taken") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.alloc()
			var we *wire.Error
			if !errors.As(err, &we) || we.Code != "room_name_taken" || we.Status != http.StatusConflict || we.Retryable {
				t.Fatalf("allocate a live name: %v, want 409 room_name_taken (not retryable)", err)
			}
		})
	}
	roundTrip(t, p.host, p.cl, p.id, "after-conflicts")
	if n := totalRooms(s.relays); n != 1 {
		t.Fatalf("relays hold %d rooms, want 1", n)
	}
}

// TestPlacementLeastLoaded: within a region the balancer places a new room
// on the relay with the fewest connections, then the fewest rooms.
func TestPlacementLeastLoaded(t *testing.T) {
	b := newBalancer(t, 0, nil)
	api := newAPI(t, b.URL())
	x := newRelay(t, b.URL(), "eu", nil)
	y := newRelay(t, b.URL(), "eu", nil)
	waitRegistered(t, api, x.BootID(), y.BootID())
	relayOf := func(c wire.Capability) *relay.Server {
		for _, r := range []*relay.Server{x, y} {
			if c.Port == portOf(t, r.WSURL()) {
				return r
			}
		}
		t.Fatalf("capability port %d is no relay's", c.Port)
		return nil
	}
	first := newPair(t, api, "eu", "load-1")
	busy := relayOf(first.hostCap)
	idle := x
	if busy == x {
		idle = y
	}
	joinClient(t, api, "load-1")
	expectConnected(t, first.host)
	testutil.Eventually(t, 2*time.Second, "load-1 to count 3", func() bool { return listAll(t, api)["load-1"].ConnectedPlayers == 3 })
	// Fewest connections first: the idle relay, twice (0 connections, even
	// with more rooms than the busy one).
	for i := 2; i <= 3; i++ {
		c, err := api.Allocate(tctx(t), "eu", roomName("load", i), client.NewAllocationID())
		if err != nil {
			t.Fatal(err)
		}
		if relayOf(c) != idle {
			t.Fatalf("room %d placed on the relay with 3 connections, want the idle one", i)
		}
	}
	// Equal connections: fewest rooms wins.
	if err := first.cl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.host.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Second, "the busy relay to empty", func() bool {
		n, err := api.TotalConnections(tctx(t))
		return err == nil && n == 0
	})
	// Now busy holds load-1 (kept at 0 players for host migration, since it
	// had clients) and idle holds two empty rooms.
	c, err := api.Allocate(tctx(t), "eu", "load-4", client.NewAllocationID())
	if err != nil {
		t.Fatal(err)
	}
	if relayOf(c) != busy {
		t.Fatalf("with equal connections, room placed on the relay with more rooms (busy %d rooms, idle %d)", busy.Stats().Rooms, idle.Stats().Rooms)
	}
}
