package balancer

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// guardFront puts f behind a loopback server that passes its /ping through
// and hands every successful allocation answer to edit first (an older or
// a misbehaving relay). f then registers and publishes with the front's
// endpoint.
func guardFront(t testing.TB, f *fakeRelay, edit func(*wire.RelayAllocation)) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", f.handlePing)
	mux.HandleFunc(wire.PathRelayAllocate, func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		f.handleAllocate(rec, r)
		var out wire.RelayAllocation
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		edit(&out)
		wire.WriteJSON(w, http.StatusOK, out)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.set(func(f *fakeRelay) { f.info.Endpoint = srv.URL })
}

// guardRoom is the fake relay's room of that name.
func guardRoom(t testing.TB, f *fakeRelay, name string) fakeRoom {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[name]
	if r == nil {
		t.Fatalf("the relay holds no room %q", name)
	}
	return *r
}

// guardMetrics is the balancer's /metrics text.
func guardMetrics(h *harness) string {
	h.t.Helper()
	st, body, _ := h.do(http.MethodGet, "/metrics", nil, nil)
	if st != http.StatusOK {
		h.t.Fatalf("metrics: %d", st)
	}
	return string(body)
}

// TestAllocationAnswerNamesTheAllocation: the relay's allocation answer
// must carry a publication of the allocation asked for. An older relay
// that omits the allocation id answers for the one asked, so the exact
// retry replays and another id cannot take the room; an answer naming
// another allocation id is a sanitized relay_bad_answer.
// Replaying an allocation exactly gets its first answer back; another
// allocation id cannot take that allocation over.
func TestAllocationAnswerNamesTheAllocation(t *testing.T) {
	h := newHarness(t, nil)
	older := newFakeRelay(t, "eu")
	guardFront(t, older, func(a *wire.RelayAllocation) { a.Publication.AllocationID = "" })
	older.register(h)
	first, err := h.allocate("room", "eu", "play-1")
	noErr(t, err)
	again, err := h.allocate("room", "eu", "play-1")
	noErr(t, err)
	if again != first {
		t.Fatalf("exact replay answered %+v, first answer %+v", again, first)
	}
	_, err = h.allocate("room", "eu", "play-2")
	wantCode(t, err, wire.ErrRoomTaken.Code)

	liar := newFakeRelay(t, "us")
	guardFront(t, liar, func(a *wire.RelayAllocation) { a.Publication.AllocationID = "someone-else" })
	liar.register(h)
	st, body, _ := h.do(http.MethodPost, "/allocate_ws", map[string]string{"name": "other", "region": "us", "allocation_id": "play-3"}, nil)
	if st != http.StatusBadGateway || !contains(body, `"relay_bad_answer"`) || contains(body, "someone-else") {
		t.Fatalf("answer for another allocation: %d %s", st, body)
	}
	if _, err := h.join("other"); err == nil {
		t.Fatal("a room answered for another allocation became joinable")
	}
}

// TestCountUpdateKeepsTheAllocationID: the allocation id is fixed for an
// incarnation; a count update that omits it (older relays do) keeps it, so
// PurrNet's exact allocation retry still replays.
func TestCountUpdateKeepsTheAllocationID(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	first, err := h.allocate("room", "eu", "play-1")
	noErr(t, err)
	room := guardRoom(t, r, "room")
	wantStatuses(t, r.publish(h, wire.Publication{Name: "room", Epoch: room.epoch, Revision: room.revision + 1, Connections: 1, ClientSecret: room.clientSecret}),
		wire.PubApplied)
	again, err := h.allocate("room", "eu", "play-1")
	noErr(t, err)
	if again != first {
		t.Fatalf("exact replay after a count update answered %+v, first answer %+v", again, first)
	}
	_, err = h.allocate("room", "eu", "play-2")
	wantCode(t, err, wire.ErrRoomTaken.Code)
}

// TestOrphanedRouteIsAdoptedAgain: a route whose registration a health
// check removed comes back with its boot: the republished incarnation is
// adopted keeping the newer of the two revisions, so a delayed older
// publication does not roll its count back and the republication of the
// held revision is current; a newer one updates it. A new incarnation
// published instead replaces the orphan with its own credential.
// Republishing is what heals a lost final update, a restarted balancer or
// a relay briefly removed by health checks.
func TestOrphanedRouteIsAdoptedAgain(t *testing.T) {
	h := newHarness(t, guardQuiet)
	a := newFakeRelay(t, "eu")
	a.register(h)
	wantStatuses(t, a.publish(h, pub("room", "e1", 3, 5), pub("other", "e1", 3, 5)), wire.PubApplied, wire.PubApplied)
	a.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, DefaultHealthFailures)
	if _, err := h.join("room"); err == nil {
		t.Fatal("a removed relay's room is joinable")
	}
	a.set(func(f *fakeRelay) { f.pingFail = false })
	if resp := a.register(h); !resp.Republish {
		t.Fatal("the returning relay is not asked to republish")
	}
	players := func() map[string]int {
		out := map[string]int{}
		for _, r := range h.list(0).Results {
			out[r.Name] = r.ConnectedPlayers
		}
		return out
	}

	wantStatuses(t, a.publish(h, pub("room", "e1", 2, 2)), wire.PubApplied) // delayed
	if got := players()["room"]; got != 5 {
		t.Fatalf("after a delayed revision 2 over the orphaned revision 3: %d players, want 5", got)
	}
	c, err := h.join("room")
	noErr(t, err)
	if c.Secret != "cs-room-e1" {
		t.Fatalf("join after adoption: %+v", c)
	}
	wantStatuses(t, a.publish(h, pub("room", "e1", 3, 5)), wire.PubCurrent)
	wantStatuses(t, a.publish(h, pub("room", "e1", 4, 7)), wire.PubApplied)
	if got := players()["room"]; got != 7 {
		t.Fatalf("after revision 4: %d players, want 7", got)
	}

	wantStatuses(t, a.publish(h, pub("other", "e2", 1, 1)), wire.PubApplied) // a new incarnation
	if c, err := h.join("other"); err != nil || c.Secret != "cs-other-e2" {
		t.Fatalf("join of the new incarnation: %+v %v", c, err)
	}
	if got := players()["other"]; got != 1 {
		t.Fatalf("new incarnation: %d players, want 1", got)
	}
}

// TestRestartedBootDoesNotInheritARoute: epochs are only promised to be new
// within one boot, so a restarted relay that reuses an epoch name gets a
// route of its own, never the old boot's credential or count.
// Once a new boot of an endpoint is confirmed, the old boot's room routes
// are gone in the same step, and the new process must publish its own.
func TestRestartedBootDoesNotInheritARoute(t *testing.T) {
	h := newHarness(t, guardQuiet)
	a := newFakeRelay(t, "eu")
	a.register(h)
	wantStatuses(t, a.publish(h, wire.Publication{Name: "room", Epoch: "epoch-1", Revision: 5, Connections: 4, ClientSecret: "old-secret"}), wire.PubApplied)
	if _, err := a.registerAs(h, a.restart()); err != nil {
		t.Fatal(err)
	}
	wantStatuses(t, a.publish(h, wire.Publication{Name: "room", Epoch: "epoch-1", Revision: 1, Connections: 0, ClientSecret: "new-secret"}), wire.PubApplied)
	c, err := h.join("room")
	noErr(t, err)
	if c.Secret != "new-secret" {
		t.Fatalf("the restarted boot's room answers %q, want its own credential", c.Secret)
	}
	if l := h.list(0); l.Total != 1 || l.Results[0].ConnectedPlayers != 0 {
		t.Fatalf("list: %+v", l)
	}
}

// TestRelayTotalsFollowItsRoutes: a relay's room and connection totals
// (/v1/instances, /getTotalConnections, purrfly_balancer_rooms, and the
// least-loaded placement) follow its live routes: a count update replaces
// the room's share, a removal takes it away.
func TestRelayTotalsFollowItsRoutes(t *testing.T) {
	h := newHarness(t, nil)
	a := newFakeRelay(t, "eu")
	a.register(h)
	check := func(at string, rooms, conns int64) {
		t.Helper()
		st, body, _ := h.do(http.MethodGet, wire.PathInstances, map[string]string{"Authorization": "Bearer " + testSecret}, nil)
		var resp wire.InstancesResponse
		noErr(t, decodeAnswer(t, st, body, &resp))
		if len(resp.Instances) != 1 || resp.Instances[0].Rooms != rooms || resp.Instances[0].Connections != conns {
			t.Fatalf("%s: instances %+v, want %d rooms and %d connections", at, resp.Instances, rooms, conns)
		}
		var tc wire.TotalConnections
		st, body, _ = h.do(http.MethodGet, "/getTotalConnections", nil, nil)
		noErr(t, decodeAnswer(t, st, body, &tc))
		if int64(tc.TotalConnections) != conns {
			t.Fatalf("%s: total connections %d, want %d", at, tc.TotalConnections, conns)
		}
		if m := guardMetrics(h); !contains([]byte(m), "purrfly_balancer_rooms "+strconv.FormatInt(rooms, 10)+"\n") {
			t.Fatalf("%s: metrics lack purrfly_balancer_rooms %d", at, rooms)
		}
	}
	wantStatuses(t, a.publish(h, pub("room", "e1", 1, 3)), wire.PubApplied)
	check("published with 3", 1, 3)
	wantStatuses(t, a.publish(h, pub("room", "e1", 2, 5)), wire.PubApplied)
	check("updated to 5", 1, 5)
	wantStatuses(t, a.unregister(h, wire.Removal{Name: "room", Epoch: "e1", Revision: 2}), wire.RemApplied)
	check("removed", 0, 0)
}

// TestListResultsAreAnArray: /list answers its results as a JSON array,
// [] when there is no room or the page is past the end, never null.
func TestListResultsAreAnArray(t *testing.T) {
	h := newHarness(t, nil)
	results := func(page int) string {
		t.Helper()
		st, body, _ := h.do(http.MethodGet, "/list?page="+strconv.Itoa(page), nil, nil)
		var raw map[string]json.RawMessage
		if st != http.StatusOK || json.Unmarshal(body, &raw) != nil {
			t.Fatalf("list: %d %s", st, body)
		}
		return string(raw["results"])
	}
	if got := results(0); got != "[]" {
		t.Fatalf("no rooms: results %s, want []", got)
	}
	a := newFakeRelay(t, "eu")
	a.register(h)
	var pubs []wire.Publication
	for i := range wire.ListPageSize {
		pubs = append(pubs, pub("room-"+strconv.Itoa(i), "e1", 1, 0))
	}
	a.publish(h, pubs...)
	if got := results(1); got != "[]" {
		t.Fatalf("past the last page: results %s, want []", got)
	}
}

// TestInstancesOrderedByEndpoint: /v1/instances (and Server.Instances)
// list the registered relays ordered by endpoint.
func TestInstancesOrderedByEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	for range 4 {
		newFakeRelay(t, "eu").register(h)
	}
	st, body, _ := h.do(http.MethodGet, wire.PathInstances, map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	var resp wire.InstancesResponse
	noErr(t, decodeAnswer(t, st, body, &resp))
	for _, list := range [][]wire.Instance{resp.Instances, h.s.Instances()} {
		var eps []string
		for _, in := range list {
			eps = append(eps, in.Endpoint)
		}
		if len(eps) != 4 || !sort.StringsAreSorted(eps) {
			t.Fatalf("instances in the order %v, want 4 sorted by endpoint", eps)
		}
	}
}

// TestNoRelaysSaysWhy: an allocation with no relay to take it is no_relays
// (503, retryable), saying whether no relay is registered or every
// registered one is draining.
func TestNoRelaysSaysWhy(t *testing.T) {
	h := newHarness(t, nil)
	_, err := h.allocate("room", "eu", "play-1")
	wantCode(t, err, wire.ErrNoRelays.Code)
	if err.Message != wire.ErrNoRelays.Message {
		t.Fatalf("nothing registered: %q, want %q", err.Message, wire.ErrNoRelays.Message)
	}
	r := newFakeRelay(t, "eu")
	r.register(h)
	if st, body, _ := h.do(http.MethodPost, "/v1/instances/"+r.boot()+"/drain", map[string]string{"Authorization": "Bearer " + testSecret}, nil); st != http.StatusOK {
		t.Fatalf("drain: %d %s", st, body)
	}
	_, err = h.allocate("room", "eu", "play-1")
	wantCode(t, err, wire.ErrNoRelays.Code)
	if err.Message != "every relay is draining" || !err.Retryable || err.Status != http.StatusServiceUnavailable {
		t.Fatalf("every relay draining: %+v", err)
	}
}

// TestRegistrationMetricsByResult: purrfly_balancer_registrations_total
// tells an operator a first registration ("new") from a boot replacement
// ("replaced") and a plain heartbeat ("heartbeat"): two relays register,
// one heartbeats, one restarts.
func TestRegistrationMetricsByResult(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	r.register(h)
	newFakeRelay(t, "us").register(h)
	if _, err := r.registerAs(h, r.restart()); err != nil {
		t.Fatal(err)
	}
	m := guardMetrics(h)
	for _, line := range []string{
		`purrfly_balancer_registrations_total{result="new"} 2` + "\n",
		`purrfly_balancer_registrations_total{result="heartbeat"} 1` + "\n",
		`purrfly_balancer_registrations_total{result="replaced"} 1` + "\n",
	} {
		if !contains([]byte(m), line) {
			t.Fatalf("metrics lack %q", line)
		}
	}
}
