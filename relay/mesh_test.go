package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// meshRoom is a room held by one machine and two forwarded peers' worth of
// credentials.
type meshRoom struct {
	b                      *meshBalancer
	holder, edge           *Server
	hostSecret, clientSecr string
}

func newMeshRoom(t *testing.T) meshRoom {
	t.Helper()
	b := newMeshBalancer(t)
	holder := startMachine(t, b, "m-holder")
	edge := startMachine(t, b, "m-edge")
	hs, cs := allocateOn(t, holder, "room")
	b.place("room", holder)
	return meshRoom{b: b, holder: holder, edge: edge, hostSecret: hs, clientSecr: cs}
}

// TestMeshForwardsHintlessConnections: a host and clients that land on a
// machine without their room (no hint: PurrNet's own client) are carried
// to the holder and see exactly what direct peers see, both ways, with
// the largest messages; the edge keeps nothing of the room.
func TestMeshForwardsHintlessConnections(t *testing.T) {
	m := newMeshRoom(t)
	direct := join(t, m.holder, "room", m.clientSecr)
	// Forwarded: the room is in use, so it stays where it is (handover.go).
	host := join(t, m.edge, "room", m.hostSecret)
	idDirect := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	fwd := join(t, m.edge, "room", m.clientSecr) // forwarded
	idFwd := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	if idDirect == idFwd {
		t.Fatalf("two clients share id %d", idFwd)
	}

	// The largest payloads either way: a client's must leave room for the
	// host's [2][sender:4] header within one 65,535-byte message.
	big := bytes.Repeat([]byte{0xab}, wire.MaxMessageSize-5)
	fwd.Send(big)
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != idFwd || !bytes.Equal(p.Payload, big) {
		t.Fatalf("largest forwarded payload: from %d, %d bytes", p.IDs[0], len(p.Payload))
	}
	direct.Send([]byte("hi"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != idDirect || string(p.Payload) != "hi" {
		t.Fatalf("direct payload: %v", p)
	}
	host.Send(wire.AppendSendOne(nil, idFwd, big))
	if got := fwd.Recv(); !bytes.Equal(got, big) {
		t.Fatalf("largest payload to a forwarded client: %d bytes", len(got))
	}
	host.Send(sendOne(idDirect, "yo"))
	if got := direct.Recv(); !equal(got, "yo") {
		t.Fatalf("direct client got %q", got)
	}
	if st := m.edge.Stats(); st.Rooms != 0 || st.Connections != 2 {
		t.Fatalf("edge stats %+v, want no room and the two forwarded connections", st)
	}
	if st := m.holder.Stats(); st.Connections != 3 {
		t.Fatalf("holder stats %+v, want three connections", st)
	}
	if n := counterValue(m.edge.mesh.m.forwards.WithLabelValues("ok")); n != 2 {
		t.Fatalf("forwards ok = %v, want 2", n)
	}

	// A kick reaches the forwarded client as it would a direct one.
	host.Send(wire.AppendKick(nil, idFwd))
	if p := host.ExpectToHost(wire.ToHostDisconnected); p.IDs[0] != idFwd {
		t.Fatalf("disconnect notice for %d, want %d", p.IDs[0], idFwd)
	}
	if code := fwd.Closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("kicked forwarded client: close %v, want 1000", code)
	}
	// A forwarded client that leaves is seen leaving.
	again := join(t, m.edge, "room", m.clientSecr)
	idAgain := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	_ = again.WS.Close(websocket.StatusNormalClosure, "")
	if p := host.ExpectToHost(wire.ToHostDisconnected); p.IDs[0] != idAgain {
		t.Fatalf("disconnect notice for %d, want %d", p.IDs[0], idAgain)
	}
	// The forwarded host leaves: its direct client hears "host left".
	_ = host.WS.Close(websocket.StatusNormalClosure, "")
	if code := direct.Closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("client of a host that left: close %v", code)
	}
	waitFor(t, "the edge to let go of every link", func() bool {
		return m.edge.Stats().Connections == 0 && counterValue(m.edge.mesh.m.active) == 0
	})
}

// TestMeshForwardedCloseBehaviour: a forwarded connection ends exactly as
// a direct one would: [4] then 1008, 1003 for a text frame, 1009 past the
// size limit, 1012 when the holder drains, a dropped connection when the
// holder dies, 1012 when the edge itself shuts down.
func TestMeshForwardedCloseBehaviour(t *testing.T) {
	t.Run("auth failed", func(t *testing.T) {
		m := newMeshRoom(t)
		p := wstest.Dial(t, m.edge.WSURL())
		if got := p.Auth("room", "wrong-secret"); got != wire.AuthFailed {
			t.Fatalf("auth reply %d, want 4", got)
		}
		if code := p.Closed(); code != websocket.StatusPolicyViolation {
			t.Fatalf("close %v, want 1008", code)
		}
		// A room the balancer does not know is refused by the edge itself.
		p = wstest.Dial(t, m.edge.WSURL())
		if got := p.Auth("no-such-room", "x"); got != wire.AuthFailed {
			t.Fatalf("unknown room: auth reply %d, want 4", got)
		}
		if code := p.Closed(); code != websocket.StatusPolicyViolation {
			t.Fatalf("unknown room: close %v, want 1008", code)
		}
		if n := counterValue(m.edge.mesh.m.forwards.WithLabelValues("not_found")); n != 1 {
			t.Fatalf("forwards not_found = %v", n)
		}
	})
	t.Run("text frame and size limit", func(t *testing.T) {
		m := newMeshRoom(t)
		host := join(t, m.holder, "room", m.hostSecret)
		c := join(t, m.edge, "room", m.clientSecr)
		host.ExpectToHost(wire.ToHostConnected)
		if err := c.WS.Write(t.Context(), websocket.MessageText, []byte("hi")); err != nil {
			t.Fatal(err)
		}
		if code := c.Closed(); code != websocket.StatusUnsupportedData {
			t.Fatalf("text frame: close %v, want 1003", code)
		}
		host.ExpectToHost(wire.ToHostDisconnected)
		c = join(t, m.edge, "room", m.clientSecr)
		host.ExpectToHost(wire.ToHostConnected)
		if err := c.WS.Write(t.Context(), websocket.MessageBinary, make([]byte, wire.MaxMessageSize+1)); err != nil {
			t.Fatal(err)
		}
		if code := c.Closed(); code != websocket.StatusMessageTooBig && code != -1 {
			t.Fatalf("oversized message: close %v, want 1009", code)
		}
		host.ExpectToHost(wire.ToHostDisconnected)
	})
	t.Run("holder drains", func(t *testing.T) {
		m := newMeshRoom(t)
		host := join(t, m.holder, "room", m.hostSecret)
		c := join(t, m.edge, "room", m.clientSecr)
		host.ExpectToHost(wire.ToHostConnected)
		go func() { _ = m.holder.Close() }()
		if code := c.Closed(); code != websocket.StatusServiceRestart {
			t.Fatalf("holder shut down: forwarded client close %v, want 1012", code)
		}
	})
	t.Run("holder dies", func(t *testing.T) {
		m := newMeshRoom(t)
		// Only the link runs to the holder (a host there could be seen
		// leaving first, which would close the link with 1000 "host left").
		c := join(t, m.edge, "room", m.clientSecr)
		start := time.Now()     // wall clock: how soon a real dropped socket ends the forwarded one
		m.holder.raw.closeAll() // every socket of the holder drops, no close frame
		if code := c.Closed(); code != -1 {
			t.Fatalf("holder died: forwarded client close %v, want a dropped connection", code)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("forwarded client closed %v after its holder died", d)
		}
	})
	t.Run("edge shuts down", func(t *testing.T) {
		m := newMeshRoom(t)
		host := join(t, m.holder, "room", m.hostSecret)
		c := join(t, m.edge, "room", m.clientSecr)
		id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
		go func() { _ = m.edge.Close() }()
		if code := c.Closed(); code != websocket.StatusServiceRestart {
			t.Fatalf("edge shut down: close %v, want 1012", code)
		}
		if p := host.ExpectToHost(wire.ToHostDisconnected); p.IDs[0] != id {
			t.Fatalf("disconnect notice for %d, want %d", p.IDs[0], id)
		}
	})
}

// upgrade sends a bare WebSocket upgrade request and returns the answer.
func upgrade(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, _ := do(t, req)
	return resp
}

// TestMeshRoutesHintedUpgrades: a hinted upgrade for a room another
// machine of the app holds is replayed to that machine (not to the
// hashing owner); one that was replayed already is served and forwarded;
// a room nobody knows goes to the configured Router.
func TestMeshRoutesHintedUpgrades(t *testing.T) {
	b := newMeshBalancer(t)
	holder := startMachine(t, b, "m-holder")
	edge := startRelay(t, Options{
		BalancerURL: b.srv.URL, MultiMachine: true, MachineID: "m-edge",
		PublicHost: "app.test", PublicWSPort: 443, Region: "ams",
		Router: func(sid wire.SessionID, r *http.Request) wire.RouteResult {
			return wire.RouteResult{Instance: "m-hashed"}
		},
	})
	_, cs := allocateOn(t, holder, "room")
	b.place("room", holder)
	base := edge.HTTPURL() + "/?s="

	resp := upgrade(t, base+wire.SessionID("room").Hint(), nil)
	if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get(wire.HeaderFlyReplay) != "instance=m-holder" {
		t.Fatalf("hinted upgrade for a room held elsewhere: %d %q", resp.StatusCode, resp.Header.Get(wire.HeaderFlyReplay))
	}
	resp = upgrade(t, base+wire.SessionID("unknown").Hint(), nil)
	if resp.Header.Get(wire.HeaderFlyReplay) != "instance=m-hashed" {
		t.Fatalf("unknown room: Fly-Replay %q, want the Router's owner", resp.Header.Get(wire.HeaderFlyReplay))
	}
	// Replayed once already: served here and forwarded after the auth.
	ws, _, err := websocket.Dial(t.Context(), "ws"+base[len("http"):]+wire.SessionID("room").Hint(), &websocket.DialOptions{
		HTTPHeader: http.Header{wire.HeaderFlyReplaySrc: {"instance=m-other;region=ams;t=1"}},
	})
	if err != nil {
		t.Fatalf("replayed upgrade: %v", err)
	}
	p := &wstest.Peer{TB: t, WS: ws}
	t.Cleanup(func() { _ = ws.CloseNow() })
	if got := p.Auth("room", cs); got != wire.Authenticated {
		t.Fatalf("replayed then forwarded client: auth %d", got)
	}
	if holder.Stats().Connections != 1 || edge.Stats().Rooms != 0 {
		t.Fatal("the replayed client was not carried to the holder")
	}
	// A room the edge holds itself is served at once.
	hsLocal, _ := allocateOn(t, edge, "local")
	b.place("local", edge)
	local := wstest.Dial(t, edge.WSURL()+"/?s="+wire.SessionID("local").Hint())
	if got := local.Auth("local", hsLocal); got != wire.Authenticated {
		t.Fatalf("local room: auth %d", got)
	}
	if n := counterValue(edge.mesh.m.routes.WithLabelValues("replay")); n != 1 {
		t.Fatalf("replay decisions %v, want 1", n)
	}

	// The balancer's allocation names this boot: created here whatever
	// the Router says; without it the Router is asked as before.
	allocateOn(t, edge, "placed-here")
	_, status, e := allocate(t, edge, "elsewhere", "a")
	if status != http.StatusMisdirectedRequest || e.Code != "fly_replay" {
		t.Fatalf("allocation without the target boot: %d %v", status, e)
	}
}

// TestMeshForwardRoute: the link route takes the shared secret and never
// forwards again (a room elsewhere is refused, not bounced).
func TestMeshForwardRoute(t *testing.T) {
	m := newMeshRoom(t)
	url := "ws" + m.edge.HTTPURL()[len("http"):] + wire.PathForward
	resp := upgrade(t, "http"+url[len("ws"):], nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("link without the secret: %d", resp.StatusCode)
	}
	ws, _, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{
		HTTPHeader: http.Header{wire.HeaderInternalSecret: {testSecret}, wire.HeaderForwardedBy: {"test"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	p := &wstest.Peer{TB: t, WS: ws}
	before := m.b.lookupCount()
	if got := p.Auth("room", m.clientSecr); got != wire.AuthFailed {
		t.Fatalf("a link for a room held elsewhere: auth %d, want 4", got)
	}
	if m.b.lookupCount() != before {
		t.Fatal("a forwarded connection looked its room up again")
	}
}

// TestMeshLocationsAreCached: lookups of one room within LocateTTL share
// one balancer request; after it they ask again.
func TestMeshLocationsAreCached(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := newMeshBalancer(t)
	holder := startMachine(t, b, "m-holder")
	edge := startRelay(t, Options{BalancerURL: b.srv.URL, MultiMachine: true, MachineID: "m-edge", Clock: clk})
	_, cs := allocateOn(t, holder, "room")
	b.place("room", holder)
	for range 3 {
		join(t, edge, "room", cs)
	}
	if n := b.lookupCount(); n != 1 {
		t.Fatalf("%d lookups for three connections within the TTL, want 1", n)
	}
	clk.Advance(DefaultLocateTTL)
	join(t, edge, "room", cs)
	if n := b.lookupCount(); n != 2 {
		t.Fatalf("%d lookups after the TTL, want 2", n)
	}
}

// TestMeshOptions: a multi-machine relay needs a balancer to ask where
// rooms live, and registers its own endpoint with the app's public one.
func TestMeshOptions(t *testing.T) {
	if _, err := New(Options{Secret: testSecret, MultiMachine: true}); err == nil {
		t.Fatal("a multi-machine relay without a balancer was accepted")
	}
	if _, err := New(Options{Secret: testSecret, PublicEndpoint: "ftp://x"}); err == nil {
		t.Fatal("a malformed public endpoint was accepted")
	}
	b := newMeshBalancer(t)
	s := startRelay(t, Options{BalancerURL: b.srv.URL, MultiMachine: true, PublicHost: "app.test",
		PublicEndpoint: "https://app.test"})
	info := s.relayInfo()
	if info.PublicEndpoint != "https://app.test" || info.Endpoint != s.HTTPURL() {
		t.Fatalf("registered endpoint %q, public %q; want the machine's own address and the app's URL", info.Endpoint, info.PublicEndpoint)
	}
}

// TestMeshRefusesAStaleTargetBoot: a machine of a multi-machine app asked to
// allocate for a boot it does not run (it restarted on the same address)
// refuses with stale_boot, which the balancer takes as "try another", and
// creates nothing.
func TestMeshRefusesAStaleTargetBoot(t *testing.T) {
	b := newMeshBalancer(t)
	s := startMachine(t, b, "m1")
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL()+wire.PathRelayAllocate+"?s="+wire.SessionID("room").Hint(), nil)
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	req.Header.Set(wire.HeaderName, "room")
	req.Header.Set(wire.HeaderAllocationID, "alloc-room")
	req.Header.Set(wire.HeaderTargetBoot, "an-earlier-boot")
	resp, body := do(t, req)
	var e wire.Error
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusConflict || e.Code != wire.ErrStaleBoot.Code {
		t.Fatalf("allocate for another boot: %d %s, want 409 stale_boot", resp.StatusCode, body)
	}
	if resp.Header.Get(wire.HeaderFlyReplay) != "" {
		t.Fatal("answered with Fly-Replay, which the balancer cannot follow")
	}
	if st := s.Stats(); st.Rooms != 0 {
		t.Fatalf("a room was created: %+v", st)
	}
}

// TestMeshRelocatesAfterAFailedDial: a cached holder that cannot be dialed
// (it died; the name now lives on another machine) is forgotten and the
// room looked up once more, so a valid client still joins instead of being
// refused with [4].
func TestMeshRelocatesAfterAFailedDial(t *testing.T) {
	b := newMeshBalancer(t)
	edge := startMachine(t, b, "edge")
	gone := startMachine(t, b, "gone")
	holder := startMachine(t, b, "holder")
	hs, cs := allocateOn(t, holder, "room")
	b.place("room", gone)
	if loc, found, err := edge.mesh.loc.locate(context.Background(), "room"); err != nil || !found || loc.BootID != gone.BootID() {
		t.Fatalf("priming the edge's cache: %+v %v %v", loc, found, err)
	}
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	b.place("room", holder)
	host := join(t, holder, "room", hs)
	fwd := join(t, edge, "room", cs) // the cached answer names the closed machine
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	fwd.Send([]byte("hello"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != id || string(p.Payload) != "hello" {
		t.Fatalf("forwarded payload after relocating: %+v", p)
	}
}
