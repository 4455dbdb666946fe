package balancer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// fleet2 is an admin harness with relays in eu and us and three rooms:
// eu-waiting (allocated, nobody yet), eu-active (3 players), us-vacant.
func fleet2(t *testing.T) (*harness, *fakeRelay, *fakeRelay, *client.Admin) {
	t.Helper()
	h, _ := adminHarness(t, nil, nil)
	eu, us := newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	eu.register(h)
	us.register(h)
	_, err := h.allocate("eu-waiting", "eu", "a1")
	noErr(t, err)
	wantStatuses(t, eu.publish(h, pub("eu-active", "e1", 1, 3)), wire.PubApplied)
	v := pub("us-vacant", "e2", 1, 0)
	v.Vacant = true
	wantStatuses(t, us.publish(h, v), wire.PubApplied)
	return h, eu, us, h.admin(adminKeyA)
}

func TestV1Stats(t *testing.T) {
	h, eu, _, a := fleet2(t)
	if _, err := a.Drain(t.Context(), eu.boot()); err != nil {
		t.Fatal(err)
	}
	st, err := a.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Stats{Relays: 2, Draining: 1, Rooms: 3, Players: 3, Regions: []wire.RegionStats{
		{Region: "eu", Relays: 1, Draining: 1, Rooms: 2, Players: 3}, {Region: "us", Relays: 1, Rooms: 1}}}
	if !statsEqual(st, want) {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
	st2, body, _ := h.do(http.MethodPut, wire.PathStats, bearer(adminKeyA), nil)
	wantErrBody(t, st2, body, http.StatusMethodNotAllowed, wire.ErrMethodNotAllowed.Code)
}

func TestV1Instances(t *testing.T) {
	h, eu, us, a := fleet2(t)
	l, err := a.Instances(t.Context())
	if err != nil || len(l) != 2 {
		t.Fatalf("instances: %+v %v", l, err)
	}
	for _, id := range []string{eu.boot(), eu.info.MachineID} {
		in, err := a.Instance(t.Context(), id)
		if err != nil || in.BootID != eu.boot() || in.Rooms != 2 || in.Connections != 3 || in.Status != wire.InstanceLive || in.Stale {
			t.Fatalf("instance %s: %+v %v", id, in, err)
		}
	}
	if _, err := a.Instance(t.Context(), "no-such-boot"); !wantWire(err, wire.ErrInstanceNotFound) {
		t.Fatalf("unknown instance: %v, want 404 not_found", err)
	}
	st, body, _ := h.do(http.MethodGet, "/v1/instances/"+strings.Repeat("x", 129), bearer(adminKeyA), nil)
	wantErrBody(t, st, body, http.StatusBadRequest, wire.ErrBadRequest.Code)

	rooms, err := a.InstanceRooms(t.Context(), us.boot(), client.RoomFilter{})
	if err != nil || rooms.Total != 1 || rooms.Rooms[0].Name != "us-vacant" || rooms.Rooms[0].Phase != wire.RoomVacant {
		t.Fatalf("rooms of us: %+v %v", rooms, err)
	}
	if _, err := a.InstanceRooms(t.Context(), "no-such-boot", client.RoomFilter{}); !wantWire(err, wire.ErrInstanceNotFound) {
		t.Fatalf("rooms of an unknown instance: %v", err)
	}
	st, body, _ = h.do(http.MethodGet, "/v1/instances/"+us.boot()+"/rooms?region=eu", bearer(adminKeyA), nil)
	wantErrBody(t, st, body, http.StatusBadRequest, wire.ErrBadRequest.Code)

	// Stale after two missed heartbeats (of the default 90 s expiry), and
	// no longer after the next heartbeat.
	h.clk.Advance(61 * time.Second)
	if in, _ := a.Instance(t.Context(), eu.boot()); !in.Stale {
		t.Fatalf("not stale after 61 s without a heartbeat: %+v", in)
	}
	eu.register(h)
	if in, _ := a.Instance(t.Context(), eu.boot()); in.Stale {
		t.Fatalf("stale after a heartbeat: %+v", in)
	}
}

// TestV1Drain: drain and undrain are idempotent (200 twice), 404 for an
// unknown instance, and a drained relay takes no reservation.
func TestV1Drain(t *testing.T) {
	_, eu, us, a := fleet2(t)
	for range 2 {
		in, err := a.Drain(t.Context(), eu.info.MachineID)
		if err != nil || in.Status != wire.InstanceDraining {
			t.Fatalf("drain: %+v %v", in, err)
		}
	}
	res, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "while-eu-drains", Region: "eu", AllocationID: "m1"})
	if err != nil || res.Room.BootID != us.boot() {
		t.Fatalf("reservation while eu drains: %+v %v, want it on us", res, err)
	}
	for range 2 {
		if in, err := a.Undrain(t.Context(), eu.boot()); err != nil || in.Status != wire.InstanceLive {
			t.Fatalf("undrain: %+v %v", in, err)
		}
	}
	for _, f := range []func() error{
		func() error { _, err := a.Drain(t.Context(), "gone"); return err },
		func() error { _, err := a.Undrain(t.Context(), "gone"); return err },
	} {
		if err := f(); !wantWire(err, wire.ErrInstanceNotFound) || !errors.Is(err, wire.ErrNotFound) {
			t.Fatalf("drain of an unknown instance: %v, want 404 not_found (what rollout matches)", err)
		}
	}
}

func roomNames(r wire.RoomsResponse) string {
	var n []string
	for _, rm := range r.Rooms {
		n = append(n, rm.Name)
	}
	return strings.Join(n, ",")
}

func TestV1RoomsList(t *testing.T) {
	h, eu, us, a := fleet2(t)
	for _, tc := range []struct {
		f    client.RoomFilter
		want string
	}{
		{client.RoomFilter{}, "eu-active,eu-waiting,us-vacant"},
		{client.RoomFilter{Region: "EU"}, "eu-active,eu-waiting"},
		{client.RoomFilter{Instance: us.boot()}, "us-vacant"},
		// The 12 characters the dashboard and purrctl fleet show find the
		// relay; a prefix too short to mean anything finds nothing.
		{client.RoomFilter{Instance: us.boot()[:12]}, "us-vacant"},
		{client.RoomFilter{Instance: us.boot()[:minBootPrefix-1]}, ""},
		{client.RoomFilter{Instance: eu.info.MachineID, Phase: wire.RoomWaiting}, "eu-waiting"},
		{client.RoomFilter{Phase: wire.RoomActive}, "eu-active"},
		{client.RoomFilter{Region: "us", Phase: wire.RoomActive}, ""},
		{client.RoomFilter{Labels: []string{"tier:gold"}}, ""}, // relays carry no labels yet
		{client.RoomFilter{Limit: 2}, "eu-active,eu-waiting"},
		{client.RoomFilter{Limit: 2, After: "eu-waiting"}, "us-vacant"},
	} {
		got, err := a.Rooms(t.Context(), tc.f)
		if err != nil || roomNames(got) != tc.want {
			t.Fatalf("rooms %+v: %q %v, want %q", tc.f, roomNames(got), err, tc.want)
		}
	}
	page, _ := a.Rooms(t.Context(), client.RoomFilter{Limit: 2})
	if page.Total != 3 || page.Next != "eu-waiting" {
		t.Fatalf("first page: %+v", page)
	}
	if rm := page.Rooms[0]; rm.Region != "eu" || rm.BootID != eu.boot() || rm.MachineID != eu.info.MachineID ||
		rm.Host != eu.info.Host || rm.Epoch != "e1" || rm.Connections != 3 {
		t.Fatalf("room view %+v", rm)
	}
	for _, q := range []string{"?phase=running", "?label=nocolon", "?label=:v", "?label=k:v%20x", "?limit=0", "?limit=10001",
		"?regoin=eu", "?region=eu&region=us", "?region=" + strings.Repeat("r", 65), "?after=%01"} {
		st, body, _ := h.do(http.MethodGet, wire.PathRooms+q, bearer(adminKeyA), nil)
		wantErrBody(t, st, body, http.StatusBadRequest, wire.ErrBadRequest.Code)
	}
}

func TestV1Room(t *testing.T) {
	h, eu, _, a := fleet2(t)
	rm, err := a.Room(t.Context(), "eu-waiting")
	if err != nil || rm.BootID != eu.boot() || rm.Phase != wire.RoomWaiting {
		t.Fatalf("room: %+v %v", rm, err)
	}
	if _, err := a.Room(t.Context(), "nope"); !wantWire(err, wire.ErrRoomNotFound) {
		t.Fatalf("unknown room: %v", err)
	}
	st, body, _ := h.do(http.MethodGet, "/v1/rooms/"+strings.Repeat("n", 129), bearer(adminKeyA), nil)
	wantErrBody(t, st, body, http.StatusBadRequest, wire.ErrInvalidRoomName.Code)
	st, body, _ = h.do(http.MethodPost, "/v1/rooms/eu-waiting", bearer(adminKeyA), nil)
	wantErrBody(t, st, body, http.StatusMethodNotAllowed, wire.ErrMethodNotAllowed.Code)
}

// TestV1CloseRoom: DELETE closes the room at its relay, releases the name
// (joins fail, a new allocation id may take it), and is idempotent; a name
// never known is 404; a relay that cannot be reached is 502, retryable.
func TestV1CloseRoom(t *testing.T) {
	h, eu, _, a := fleet2(t)
	out, err := a.CloseRoom(t.Context(), "eu-waiting")
	if err != nil || !out.Closed || out.Name != "eu-waiting" {
		t.Fatalf("close: %+v %v", out, err)
	}
	if eu.roomCount() != 0 {
		t.Fatal("the relay still holds the room")
	}
	if _, jerr := h.join("eu-waiting"); jerr == nil || jerr.Code != wire.ErrRoomNotFound.Code {
		t.Fatalf("join after close: %v", jerr)
	}
	again, err := a.CloseRoom(t.Context(), "eu-waiting")
	if err != nil || again.Closed {
		t.Fatalf("second close: %+v %v, want 200 closed=false", again, err)
	}
	if _, aerr := h.allocate("eu-waiting", "eu", "another-id"); aerr != nil {
		t.Fatalf("allocation of the released name: %v", aerr)
	}
	if _, err := a.CloseRoom(t.Context(), "never-was"); !wantWire(err, wire.ErrRoomNotFound) {
		t.Fatalf("close of an unknown room: %v", err)
	}
	// The relay's own removal of the closed incarnation arrives later: it
	// changes nothing (already tombstoned).
	eu.srv.Close()
	if _, err := a.CloseRoom(t.Context(), "eu-active"); !wantWire(err, wire.ErrRelayFailed) {
		t.Fatalf("close on an unreachable relay: %v, want 502 relay_unavailable", err)
	}
	if _, err := a.Room(t.Context(), "eu-active"); err != nil {
		t.Fatalf("an unconfirmed close released the route: %v", err)
	}
}

// TestV1Reserve: POST /v1/rooms places like /allocate_ws, replays by
// (name, allocation id), answers both capabilities; another allocation id
// is 409, malformed bodies 400, bodies over 64 KiB 413, no relay 503.
func TestV1Reserve(t *testing.T) {
	h, eu, _, a := fleet2(t)
	req := wire.ReserveRequest{Name: "match-42", Region: "eu", AllocationID: "mm-1"}
	res, err := a.Reserve(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Room.Name != "match-42" || res.Room.BootID != eu.boot() || res.AllocationID != "mm-1" ||
		res.Host.Host != eu.info.Host || res.Host.Secret == "" || res.Client.Secret == "" || res.Client.Secret == res.Host.Secret ||
		res.Client.Port != eu.info.Port || res.Client.UDPPortV2 != eu.info.UDPPortV2 {
		t.Fatalf("reservation %+v", res)
	}
	if j, jerr := h.join("match-42"); jerr != nil || j.Secret != res.Client.Secret {
		t.Fatalf("join of the reserved room: %+v %v", j, jerr)
	}
	again, err := a.Reserve(t.Context(), req)
	if err != nil || again.Host != res.Host || again.Client != res.Client {
		t.Fatalf("replay: %+v %v", again, err)
	}
	req.AllocationID = "mm-2"
	if _, err := a.Reserve(t.Context(), req); !wantWire(err, wire.ErrRoomTaken) {
		t.Fatalf("another allocation id: %v, want 409 room_name_taken", err)
	}
	for _, body := range []string{``, `{`, `[]`, `{"name":"x"}`, `{"name":"x","allocationId":"a","extra":1}`,
		`{"name":"x","allocationId":"a"}{}`, `{"name":"x","allocationId":"a","region":"` + strings.Repeat("r", 65) + `"}`} {
		st, b, _ := h.do(http.MethodPost, wire.PathRooms, bearer(adminKeyA), []byte(body))
		wantErrBody(t, st, b, http.StatusBadRequest, wire.ErrBadRequest.Code)
	}
	for _, body := range []string{`{"allocationId":"a"}`, `{"name":"` + strings.Repeat("n", 129) + `","allocationId":"a"}`, `{"name":"x\u0001","allocationId":"a"}`} {
		st, b, _ := h.do(http.MethodPost, wire.PathRooms, bearer(adminKeyA), []byte(body))
		wantErrBody(t, st, b, http.StatusBadRequest, wire.ErrInvalidRoomName.Code)
	}
	big, _ := json.Marshal(wire.ReserveRequest{Name: "big", AllocationID: strings.Repeat("a", 70<<10)})
	st, b, _ := h.do(http.MethodPost, wire.PathRooms, bearer(adminKeyA), big)
	wantErrBody(t, st, b, http.StatusRequestEntityTooLarge, wire.ErrBodyTooLarge.Code)

	// A matchmaker's reservation is an explicit placement: nothing fits is
	// 409 no_candidate, saying why (PurrNet's /allocate_ws keeps 503).
	empty, _ := adminHarness(t, nil, nil)
	if _, err := empty.admin(adminKeyA).Reserve(t.Context(), wire.ReserveRequest{Name: "x", AllocationID: "a"}); !wantWire(err, wire.ErrNoCandidate) ||
		!strings.Contains(err.Error(), "no relay is registered") {
		t.Fatalf("no relay: %v, want 409 no_candidate saying why", err)
	}
	for _, body := range []string{`{"name":"x","allocationId":"a","strategy":"fastest"}`, `{"name":"x","allocationId":"a","labels":{"bad key":"v"}}`} {
		st, b, _ := h.do(http.MethodPost, wire.PathRooms, bearer(adminKeyA), []byte(body))
		wantErrBody(t, st, b, http.StatusBadRequest, wire.ErrBadRequest.Code)
	}
}

// TestV1ETag: the list routes answer 304 to their own ETag while the
// fleet is unchanged (heartbeats and time do not count), and a fresh
// ETag after a change.
func TestV1ETag(t *testing.T) {
	h, eu, _, a := fleet2(t)
	for _, path := range []string{wire.PathStats, wire.PathInstances, wire.PathRooms, "/v1/instances/" + eu.boot() + "/rooms"} {
		tag, nm, err := a.GetTagged(t.Context(), path, "", nil)
		if err != nil || nm || !strings.HasPrefix(tag, `W/"`) {
			t.Fatalf("%s: etag %q %v %v", path, tag, nm, err)
		}
		h.clk.Advance(5 * time.Second)
		eu.register(h) // a heartbeat: new lastHeartbeat, same semantic state
		for _, inm := range []string{tag, `"x", ` + tag, strings.TrimPrefix(tag, "W/"), "*"} {
			if _, nm, err := a.GetTagged(t.Context(), path, inm, nil); err != nil || !nm {
				t.Fatalf("%s with If-None-Match %s on an unchanged fleet: notModified=%v %v", path, inm, nm, err)
			}
		}
		st, body, _ := h.do(http.MethodGet, path, map[string]string{"Authorization": "Bearer " + adminKeyA, "If-None-Match": tag}, nil)
		if st != http.StatusNotModified || len(body) != 0 {
			t.Fatalf("%s: 304 with body %q (status %d)", path, body, st)
		}
		_, aerr := h.allocate("changed-"+strings.ReplaceAll(path, "/", "-"), "eu", "c1")
		noErr(t, aerr)
		fresh, nm, err := a.GetTagged(t.Context(), path, tag, nil)
		if err != nil || nm || fresh == tag {
			t.Fatalf("%s after a change: etag %q (was %q) notModified=%v %v", path, fresh, tag, nm, err)
		}
		// A malformed If-None-Match is ignored: a plain 200.
		if _, nm, _ := a.GetTagged(t.Context(), path, `W/"unterminated`, nil); nm {
			t.Fatalf("%s: a malformed If-None-Match matched", path)
		}
	}
}

// TestV1CORS: /v1 answers carry no CORS header unless the origin is
// listed (the public routes keep theirs); preflights likewise, and are
// never cached.
func TestV1CORS(t *testing.T) {
	for _, listed := range []bool{false, true} {
		h, _ := adminHarness(t, nil, func(o *Options) {
			if listed {
				o.AdminCORSOrigins = []string{"https://ops.example"}
			}
		})
		hdr := map[string]string{"Authorization": "Bearer " + adminKeyA, "Origin": "https://ops.example"}
		_, _, hd := h.do(http.MethodGet, wire.PathStats, hdr, nil)
		if got := hd.Get("Access-Control-Allow-Origin"); (got == "https://ops.example") != listed || (!listed && got != "") {
			t.Fatalf("listed=%v: Access-Control-Allow-Origin %q", listed, got)
		}
		_, _, hd = h.do(http.MethodGet, wire.PathStats, map[string]string{"Origin": "https://ops.example"}, nil) // 401 too
		if got := hd.Get("Access-Control-Allow-Origin"); (got != "") != listed {
			t.Fatalf("listed=%v: on a 401 Access-Control-Allow-Origin %q", listed, got)
		}
		_, _, hd = h.do(http.MethodGet, wire.PathStats, map[string]string{"Authorization": "Bearer " + adminKeyA, "Origin": "https://evil.example"}, nil)
		if got := hd.Get("Access-Control-Allow-Origin"); got != "" {
			t.Fatalf("an unlisted origin got %q", got)
		}
		st, _, hd := h.do(http.MethodOptions, "/v1/rooms/x", map[string]string{"Origin": "https://ops.example", "Access-Control-Request-Method": "DELETE"}, nil)
		if st != http.StatusNoContent || (hd.Get("Access-Control-Allow-Origin") != "") != listed ||
			listed && !strings.Contains(hd.Get("Access-Control-Allow-Methods"), "DELETE") {
			t.Fatalf("listed=%v: preflight %d %v", listed, st, hd)
		}
		if hd.Get("Cache-Control") != "no-store, private" || hd.Get("Pragma") != "no-cache" {
			t.Fatalf("a preflight may be cached: Cache-Control %q, Pragma %q", hd.Get("Cache-Control"), hd.Get("Pragma"))
		}
		if _, _, hd = h.do(http.MethodGet, "/servers", map[string]string{"Origin": "https://game.example"}, nil); hd.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatal("the public routes lost their CORS")
		}
	}
}

// TestHealthRoutes: /healthz and /readyz need no key; /readyz is 503 once
// Shutdown begins.
func TestHealthRoutes(t *testing.T) {
	h, _ := adminHarness(t, nil, nil)
	for _, p := range []string{wire.PathHealthz, wire.PathReadyz} {
		if st, body, _ := h.do(http.MethodGet, p, nil, nil); st != http.StatusOK {
			t.Fatalf("%s: %d %s", p, st, body)
		}
	}
	h.s.draining.Store(true)
	st, body, _ := h.do(http.MethodGet, wire.PathReadyz, nil, nil)
	wantErrBody(t, st, body, http.StatusServiceUnavailable, wire.ErrDraining.Code)
	if st, _, _ := h.do(http.MethodGet, wire.PathHealthz, nil, nil); st != http.StatusOK {
		t.Fatalf("healthz while draining: %d", st)
	}
}

// TestV1ReservePinned: a matchmaker may pin a reservation to one relay:
// placed there even when another region was asked; 409 instance_draining
// while it drains; 404 not_found for a relay that is not registered.
func TestV1ReservePinned(t *testing.T) {
	_, eu, us, a := fleet2(t)
	res, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "pinned", Region: "eu", AllocationID: "p1", Instance: us.boot()})
	if err != nil || res.Room.BootID != us.boot() {
		t.Fatalf("pinned to us: %+v %v", res, err)
	}
	if _, err := a.Drain(t.Context(), us.boot()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "pinned-2", AllocationID: "p2", Instance: us.boot()}); !wantWire(err, wire.ErrInstanceDraining) {
		t.Fatalf("pinned to a draining relay: %v, want 409 instance_draining", err)
	}
	if _, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "pinned-3", AllocationID: "p3", Instance: "no-such-boot"}); !wantWire(err, wire.ErrInstanceNotFound) {
		t.Fatalf("pinned to no relay: %v, want 404 not_found", err)
	}
	if res, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "pinned-4", AllocationID: "p4", Instance: eu.boot()}); err != nil || res.Room.BootID != eu.boot() {
		t.Fatalf("pinned to eu: %+v %v", res, err)
	}
}

// TestRoomNamesAnOperatorCanReach: every name allocation accepts can be
// read and closed through /v1/rooms/{name} (a '/' and '..' inside a name
// percent-encoded, as client.Admin and the dashboard send them); "." and
// "..", which no URL can address, and control characters are refused at
// allocation with invalid_room_name.
func TestRoomNamesAnOperatorCanReach(t *testing.T) {
	h, _, _, a := fleet2(t)
	for i, name := range []string{"a/b", "../x", "../../etc/passwd", "lobby ..", "%2F", "✓ room"} {
		if _, err := h.allocate(name, "eu", fmt.Sprintf("n%d", i)); err != nil {
			t.Fatalf("allocate %q: %v", name, err)
		}
		if rm, err := a.Room(t.Context(), name); err != nil || rm.Name != name {
			t.Fatalf("read %q: %+v %v", name, rm, err)
		}
		if out, err := a.CloseRoom(t.Context(), name); err != nil || !out.Closed {
			t.Fatalf("close %q: %+v %v", name, out, err)
		}
	}
	for _, name := range []string{".", ".."} {
		_, err := h.allocate(name, "eu", "dot")
		if err == nil || err.Code != wire.ErrInvalidRoomName.Code {
			t.Fatalf("allocate %q: %v, want invalid_room_name", name, err)
		}
		st, body, _ := h.do(http.MethodPost, wire.PathRooms, bearer(adminKeyA), []byte(`{"name":"`+name+`","allocationId":"r"}`))
		wantErrBody(t, st, body, http.StatusBadRequest, wire.ErrInvalidRoomName.Code)
	}
}
