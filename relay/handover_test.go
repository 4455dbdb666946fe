package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// TestMeshRoomFollowsItsHost: a host that reaches a machine not holding
// its (empty) room takes the room with it: the holder hands it over, the
// host is served directly (never forwarded, so its game depends on one
// machine only), the new incarnation is published as moved from the old
// one with the same credentials, later clients anywhere reach it, and a
// replay of the original allocation still answers the same host secret.
func TestMeshRoomFollowsItsHost(t *testing.T) {
	m := newMeshRoom(t)
	session := m.holder.core.Room("room").Incarnation() // the game session, for host migration
	host := join(t, m.edge, "room", m.hostSecret)

	if st := m.edge.Stats(); st.Rooms != 1 || st.Connections != 1 {
		t.Fatalf("edge stats %+v, want the room and its host", st)
	}
	if st := m.holder.Stats(); st.Rooms != 0 {
		t.Fatalf("old holder stats %+v, want no room", st)
	}
	if n := counterValue(m.edge.mesh.m.forwards.WithLabelValues("ok")); n != 0 {
		t.Fatalf("the host was forwarded (%v)", n)
	}
	if ok, given := counterValue(m.edge.mesh.m.handovers.WithLabelValues("ok")),
		counterValue(m.holder.mesh.m.handovers.WithLabelValues("given")); ok != 1 || given != 1 {
		t.Fatalf("handovers: asked ok %v, given %v; want 1 and 1", ok, given)
	}
	// Published before the host was served: already at the balancer.
	ps := m.b.movedPublications()
	if len(ps) == 0 {
		t.Fatal("the host was served before the balancer heard of the move")
	}
	moved := ps[0]
	if moved.Name != "room" || moved.ClientSecret != m.clientSecr || moved.AllocationID != "alloc-room" ||
		moved.MovedFrom.BootID != m.holder.BootID() || moved.MovedFrom.Epoch == moved.Epoch || moved.MovedFrom.Epoch == "" {
		t.Fatalf("moved publication %+v (from %+v)", moved, moved.MovedFrom)
	}
	if inc := m.edge.core.Room("room").Incarnation(); inc != session {
		t.Fatalf("the moved room is session %q, want the holder's %q (a handover is not a new game)", inc, session)
	}

	// A client that lands on the old holder is forwarded to the new one; a
	// client on the new holder is direct.
	viaOld := join(t, m.holder, "room", m.clientSecr)
	idOld := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	direct := join(t, m.edge, "room", m.clientSecr)
	idDirect := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	viaOld.Send([]byte("from old"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != idOld || string(p.Payload) != "from old" {
		t.Fatalf("host got %v", p)
	}
	host.Send(sendOne(idOld, "back"))
	if got := viaOld.Recv(); !equal(got, "back") {
		t.Fatalf("forwarded client got %q", got)
	}
	host.Send(sendOne(idDirect, "yo"))
	if got := direct.Recv(); !equal(got, "yo") {
		t.Fatalf("direct client got %q", got)
	}
	if n := counterValue(m.holder.mesh.m.forwards.WithLabelValues("ok")); n != 1 {
		t.Fatalf("old holder forwarded %v clients, want 1", n)
	}

	// The host's allocation retried (its answer was lost): the same room.
	if hs, cs := allocateOn(t, m.edge, "room"); hs != m.hostSecret || cs != m.clientSecr {
		t.Fatal("a replay of the allocation answered other credentials after the handover")
	}
}

// TestMeshHandoverRefused: a room stays where it is unless the host
// arrives to an empty room: a client's secret, a wrong secret or a room in
// use are declined and the connection is forwarded as before; the route
// wants the internal secret, POST and a well-formed body.
func TestMeshHandoverRefused(t *testing.T) {
	m := newMeshRoom(t)
	third := startMachine(t, m.b, "m-third")

	// A client first, on the edge: declined (not the host's secret).
	cl := join(t, m.edge, "room", m.clientSecr)
	// The host on a third machine: declined (the room is in use).
	host := join(t, third, "room", m.hostSecret)
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	cl.Send([]byte("hi"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != id || string(p.Payload) != "hi" {
		t.Fatalf("host got %v", p)
	}
	if st := m.holder.Stats(); st.Rooms != 1 || st.Connections != 2 {
		t.Fatalf("holder stats %+v, want the room with both connections", st)
	}
	if d := counterValue(m.holder.mesh.m.handovers.WithLabelValues("declined")); d != 2 {
		t.Fatalf("holder declined %v handovers, want 2", d)
	}
	if r := counterValue(m.edge.mesh.m.handovers.WithLabelValues("refused")) +
		counterValue(third.mesh.m.handovers.WithLabelValues("refused")); r != 2 {
		t.Fatalf("%v refusals seen by the askers, want 2", r)
	}
	if len(m.b.movedPublications()) != 0 {
		t.Fatal("a refused handover was published")
	}

	post := func(body string, secret bool, method string) (int, string) {
		resp, b := askHandover(t, m.holder, method, body, secret)
		var e struct{ Code string }
		_ = json.Unmarshal(b, &e)
		if bytes.Contains(b, []byte(m.hostSecret)) {
			t.Fatalf("a refusal leaked the host secret: %s", b)
		}
		return resp.StatusCode, e.Code
	}
	good := `{"name":"room","secret":"` + m.hostSecret + `","bootId":"asker"}`
	for _, tc := range []struct {
		body, method string
		secret       bool
		status       int
		code         string
	}{
		{good, http.MethodPost, false, http.StatusUnauthorized, "unauthorized"},
		{good, http.MethodGet, true, http.StatusMethodNotAllowed, "method_not_allowed"},
		{`{"name":`, http.MethodPost, true, http.StatusBadRequest, "bad_request"},
		{`{"name":"room","secret":"x"}`, http.MethodPost, true, http.StatusBadRequest, "bad_request"}, // no asker
		{`{"name":"nope","secret":"x","bootId":"asker"}`, http.MethodPost, true, http.StatusConflict, "handover_refused"},
		{good, http.MethodPost, true, http.StatusConflict, "handover_refused"}, // in use
	} {
		if st, code := post(tc.body, tc.secret, tc.method); st != tc.status || code != tc.code {
			t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.body, st, code, tc.status, tc.code)
		}
	}
}

// TestMeshDrainingMachineTakesNoRoom: a draining machine takes no new
// rooms, so a host that reaches it is forwarded to its room's holder
// instead of claiming the room; a draining holder still gives a room away
// (the room leaves the machine that is going away).
func TestMeshDrainingMachineTakesNoRoom(t *testing.T) {
	m := newMeshRoom(t)
	m.edge.core.SetDraining()
	host := join(t, m.edge, "room", m.hostSecret)
	if m.edge.Stats().Rooms != 0 || m.holder.Stats().Rooms != 1 || m.holder.Stats().Connections != 1 {
		t.Fatalf("a draining edge claimed the room: edge %+v holder %+v", m.edge.Stats(), m.holder.Stats())
	}
	_ = host.WS.CloseNow()

	m = newMeshRoom(t)
	m.holder.core.SetDraining()
	join(t, m.edge, "room", m.hostSecret)
	if m.edge.Stats().Rooms != 1 || m.holder.Stats().Rooms != 0 {
		t.Fatalf("a draining holder kept the room: edge %+v holder %+v", m.edge.Stats(), m.holder.Stats())
	}
}

// TestMeshNoHandoverWithAnOlderBalancer: a balancer that does not say it
// applies moved publications (one that predates handovers) would refuse
// the moved room as a conflict, so no machine asks for a handover: the
// host is forwarded as before.
func TestMeshNoHandoverWithAnOlderBalancer(t *testing.T) {
	b := newMeshBalancer(t)
	b.noHandover.Store(true)
	holder := startMachine(t, b, "m-holder")
	edge := startMachine(t, b, "m-edge")
	hs, _ := allocateOn(t, holder, "room")
	b.place("room", holder)
	join(t, edge, "room", hs)
	if edge.Stats().Rooms != 0 || holder.Stats().Rooms != 1 || holder.Stats().Connections != 1 {
		t.Fatalf("the room moved without the balancer's support: edge %+v holder %+v", edge.Stats(), holder.Stats())
	}
	if n := counterValue(holder.mesh.m.handovers.WithLabelValues("declined")) + counterValue(holder.mesh.m.handovers.WithLabelValues("given")); n != 0 {
		t.Fatalf("the holder was asked %v times", n)
	}
}

// TestMeshHandoverAnswerLost: the holder gives the room up before its
// answer travels; when that answer is lost, the same asker asking again
// gets the same credentials, so the room is not lost between the two.
func TestMeshHandoverAnswerLost(t *testing.T) {
	m := newMeshRoom(t)
	// The edge's first request reached the holder, its answer did not.
	body := `{"name":"room","secret":"` + m.hostSecret + `","bootId":"` + m.edge.BootID() + `"}`
	if resp, _ := askHandover(t, m.holder, http.MethodPost, body, true); resp.StatusCode != http.StatusOK {
		t.Fatalf("first handover request: %d", resp.StatusCode)
	}
	if m.holder.Stats().Rooms != 0 {
		t.Fatal("the holder kept the room it gave")
	}
	// Another machine asking for it gets nothing.
	other := `{"name":"room","secret":"` + m.hostSecret + `","bootId":"someone-else"}`
	if resp, _ := askHandover(t, m.holder, http.MethodPost, other, true); resp.StatusCode != http.StatusConflict {
		t.Fatalf("another asker: %d, want 409", resp.StatusCode)
	}
	// The host reaches the edge, which asks again: same room, served.
	join(t, m.edge, "room", m.hostSecret)
	if m.edge.Stats().Rooms != 1 {
		t.Fatalf("edge stats %+v, want the room", m.edge.Stats())
	}
	if n := counterValue(m.holder.mesh.m.handovers.WithLabelValues("given_again")); n != 1 {
		t.Fatalf("given again %v times, want 1", n)
	}
}

// TestMeshHandoverRefusedByTheBalancer: when the balancer refuses the moved
// publication (another incarnation of the name won meanwhile), the asker
// drops the room again and the host gets [4]: a room is never live on two
// machines.
func TestMeshHandoverRefusedByTheBalancer(t *testing.T) {
	m := newMeshRoom(t)
	m.b.conflictMoves.Store(true)
	p := wstest.Dial(t, m.edge.WSURL())
	if got := p.Auth("room", m.hostSecret); got != wire.AuthFailed {
		t.Fatalf("host of a room the balancer gave to another incarnation: reply %d, want 4", got)
	}
	if m.edge.Stats().Rooms != 0 {
		t.Fatalf("edge stats %+v, want no room", m.edge.Stats())
	}
	if n := counterValue(m.edge.mesh.m.handovers.WithLabelValues("superseded")); n != 1 {
		t.Fatalf("superseded %v, want 1", n)
	}
}

// TestMeshNoHandoverForARoomInUse: the balancer's location says the room
// has connections, so the edge forwards at once without asking the holder
// (a client joining a running game pays no extra round trip).
func TestMeshNoHandoverForARoomInUse(t *testing.T) {
	m := newMeshRoom(t)
	m.b.setConnections("room", 1)
	join(t, m.edge, "room", m.clientSecr)
	if m.holder.Stats().Connections != 1 {
		t.Fatalf("holder stats %+v, want the forwarded client", m.holder.Stats())
	}
	if n := counterValue(m.holder.mesh.m.handovers.WithLabelValues("declined")); n != 0 {
		t.Fatalf("the holder was asked (%v declines)", n)
	}
}

// TestMeshSpentHostCredentialStaysRefused: the room follows its host to
// the machine the host reached (a handover), and once that host has left
// the room (vacant: clients were there) its credential is spent (single
// activation, host migration): coming back through either machine it is
// refused, and the room stays where it is, for a claim.
func TestMeshSpentHostCredentialStaysRefused(t *testing.T) {
	m := newMeshRoom(t)
	host := join(t, m.edge, "room", m.hostSecret)
	if m.edge.Stats().Rooms != 1 {
		t.Fatal("the room did not follow its host")
	}
	cl := join(t, m.edge, "room", m.clientSecr)
	host.ExpectToHost(wire.ToHostConnected)
	_ = host.WS.Close(websocket.StatusNormalClosure, "")
	if code := cl.Closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("client close %v", code)
	}
	waitFor(t, "the vacant room", func() bool { return m.edge.Stats().Connections == 0 })
	for _, via := range []*Server{m.edge, m.holder} {
		p := wstest.Dial(t, via.WSURL())
		if got := p.Auth("room", m.hostSecret); got != wire.AuthFailed {
			t.Fatalf("the spent host credential through %s: reply %d, want 4", via.opts.BootID, got)
		}
	}
	if m.edge.Stats().Rooms != 1 || m.holder.Stats().Rooms != 0 {
		t.Fatalf("edge %+v, holder %+v: the vacant room moved", m.edge.Stats(), m.holder.Stats())
	}
}

// TestMeshHandoverRefusedLater: the adopted room's first publication gets
// no verdict (the balancer answered 503), so the host is served; when the
// registrar's own publication is then refused (another incarnation won),
// the room ends here and its host is closed with 1012.
func TestMeshHandoverRefusedLater(t *testing.T) {
	m := newMeshRoom(t)
	m.b.failMoves.Store(1 << 20) // no verdict for the move, until the host is in
	host := join(t, m.edge, "room", m.hostSecret)
	if m.edge.Stats().Rooms != 1 {
		t.Fatal("the host was not served in the adopted room")
	}
	// Another incarnation wins; the registrar's next publication hears it.
	m.b.failMoves.Store(0)
	m.b.conflictMoves.Store(true)
	m.edge.reg.RoomChanged(m.edge.core.Room("room"))
	if code := host.Closed(); code != websocket.StatusServiceRestart {
		t.Fatalf("host of a room the balancer refused later: close %v, want 1012", code)
	}
	waitFor(t, "the refused room to end", func() bool { return m.edge.Stats().Rooms == 0 })
}

// TestMeshHandoverRetriesALostAnswer: the holder's answer to the edge's
// handover request is lost on the way (the connection drops after the
// holder gave the room up); the edge asks again and the holder answers the
// same asker the same credentials, so the host is served and the room is
// not lost between the two machines.
func TestMeshHandoverRetriesALostAnswer(t *testing.T) {
	m := newMeshRoom(t)
	target, _ := url.Parse(m.holder.HTTPURL())
	pass := httputil.NewSingleHostReverseProxy(target)
	var dropped atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.PathHandover || dropped.Swap(true) {
			pass.ServeHTTP(w, r)
			return
		}
		// Deliver the request, lose the answer.
		rec := httptest.NewRecorder()
		pass.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Errorf("the holder answered the first request %d", rec.Code)
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(proxy.Close)
	m.b.mu.Lock()
	loc := m.b.rooms["room"]
	loc.Endpoint = proxy.URL
	m.b.rooms["room"] = loc
	m.b.mu.Unlock()

	join(t, m.edge, "room", m.hostSecret)
	if !dropped.Load() || m.edge.Stats().Rooms != 1 || m.holder.Stats().Rooms != 0 {
		t.Fatalf("dropped %v, edge %+v, holder %+v: want the room on the edge", dropped.Load(), m.edge.Stats(), m.holder.Stats())
	}
	if n := counterValue(m.holder.mesh.m.handovers.WithLabelValues("given_again")); n != 1 {
		t.Fatalf("given again %v times, want 1", n)
	}
}

// askHandover sends a handover request with body to s, with the internal
// secret when secret is set, as another machine of the app would.
func askHandover(t *testing.T, s *Server, method, body string, secret bool) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, s.HTTPURL()+wire.PathHandover, strings.NewReader(body))
	if secret {
		req.Header.Set(wire.HeaderInternalSecret, testSecret)
	}
	return do(t, req)
}

// TestGivenRoomsTableIsBounded: the holder remembers up to maxGiven rooms
// it gave away (to answer a retried handover the same), sweeps the expired
// ones when full, and forgets everything rather than grow past the bound.
func TestGivenRoomsTableIsBounded(t *testing.T) {
	g := givenRooms{mu: lockrank.Mutex{Class: lockrank.Given}}
	now := time.Unix(1_800_000_000, 0)
	for i := range maxGiven {
		g.remember("asker", wire.HandoverResponse{Name: fmt.Sprint("r", i)}, now)
	}
	if len(g.m) != maxGiven {
		t.Fatalf("%d rooms remembered, want all %d", len(g.m), maxGiven)
	}
	g.remember("asker", wire.HandoverResponse{Name: "one-more"}, now) // none expired: forget the rest
	if len(g.m) != 1 {
		t.Fatalf("%d rooms remembered past the bound, want only the newest", len(g.m))
	}
	if _, ok := g.m["one-more"]; !ok {
		t.Fatal("the newest room was not remembered")
	}
}
