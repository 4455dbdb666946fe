package relay

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

func TestAllocate(t *testing.T) {
	s := startRelay(t, Options{PublicHost: "relay.example", PublicWSPort: 443, SSL: true, PublicUDPPortV2: 7000, PublicUDPPort: 7001})

	a, status, e := allocate(t, s, "room", "id-1")
	if status != http.StatusOK {
		t.Fatalf("allocate: %d %v", status, e)
	}
	if err := a.Capability.Validate(); err != nil {
		t.Fatalf("capability: %v", err)
	}
	c := a.Capability
	if c.Host != "relay.example" || c.Port != 443 || !c.SSL || c.UDPPortV2 != 7000 || c.UDPPort != 7001 {
		t.Fatalf("capability %+v", c)
	}
	p := a.Publication
	if p.Name != "room" || p.Epoch == "" || p.Revision != 1 || p.Connections != 0 ||
		p.ClientSecret == "" || p.ClientSecret == c.Secret || p.AllocationID != "id-1" || a.Replayed || a.BootID != s.BootID() {
		t.Fatalf("publication %+v replayed=%v boot=%q", p, a.Replayed, a.BootID)
	}

	// Exact replay: same capability and publication.
	b, status, _ := allocate(t, s, "room", "id-1")
	if status != http.StatusOK || !b.Replayed || b.Capability != a.Capability || b.Publication != a.Publication {
		t.Fatalf("replay: %d %+v", status, b)
	}
	// Another allocation id cannot take the live (reserved) room.
	if _, status, e := allocate(t, s, "room", "id-2"); status != http.StatusConflict || e.Code != wire.ErrRoomTaken.Code {
		t.Fatalf("conflict: %d %v", status, e)
	}
	// Neither can an allocation without an id.
	if _, status, _ := allocate(t, s, "room", ""); status != http.StatusConflict {
		t.Fatalf("no id: %d", status)
	}
	// A new room gets a new epoch and new secrets.
	o, _, _ := allocate(t, s, "other", "id-1")
	if o.Publication.Epoch == p.Epoch || o.Capability.Secret == c.Secret || o.Publication.ClientSecret == p.ClientSecret {
		t.Fatal("a second room reused an epoch or a secret")
	}

	// Bad requests.
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL()+wire.PathRelayAllocate, nil)
	req.Header.Set(wire.HeaderName, "x")
	req.Header.Set(wire.HeaderInternalSecret, "wrong")
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), testSecret) {
		t.Fatalf("wrong secret: %d %s", resp.StatusCode, body)
	}
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	req.Header.Del(wire.HeaderName)
	if resp, _ := do(t, req); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("missing name: %d", resp.StatusCode)
	}
	req.Header.Set(wire.HeaderName, strings.Repeat("n", wire.MaxSessionIDLen+1))
	if resp, _ := do(t, req); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("long name: %d", resp.StatusCode)
	}

	// Draining: no new rooms, /ping says so.
	s.core.SetDraining()
	if _, status, e := allocate(t, s, "late", "id-9"); status != http.StatusServiceUnavailable || e.Code != wire.ErrDraining.Code || !e.Retryable {
		t.Fatalf("draining: %d %v", status, e)
	}
	if !ping(t, s).Draining {
		t.Fatal("/ping does not say draining")
	}
}

func ping(t *testing.T, s *Server) wire.Ping {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.HTTPURL()+"/ping", nil)
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/ping: %d", resp.StatusCode)
	}
	if resp.Header.Get("Cache-Control") != "no-store, private" || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("/ping headers %v", resp.Header)
	}
	var p wire.Ping
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPingAndRoutes(t *testing.T) {
	s := startRelay(t, Options{BootID: "boot-1", Version: "v9", Region: "ams", MachineID: "m1", ImageRef: "img"})
	p := ping(t, s)
	want := wire.Ping{Role: "relay", BootID: "boot-1", Version: "v9", Region: "ams", MachineID: "m1",
		ImageRef: "img", InternalProtocol: wire.InternalProtocolVersion}
	if p != want {
		t.Fatalf("/ping %+v, want %+v", p, want)
	}

	// CORS preflight, as a WebGL build sends it.
	req, _ := http.NewRequest(http.MethodOptions, s.HTTPURL()+"/ping", nil)
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "cache-control")
	resp, _ := do(t, req)
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "GET") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}

	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, wire.ErrNotFound.Code},
		{http.MethodGet, "/", http.StatusNotFound, wire.ErrNotFound.Code},
		{http.MethodPost, "/ping", http.StatusMethodNotAllowed, wire.ErrMethodNotAllowed.Code},
		{http.MethodGet, wire.PathRelayAllocate, http.StatusMethodNotAllowed, wire.ErrMethodNotAllowed.Code},
	} {
		req, _ := http.NewRequest(tc.method, s.HTTPURL()+tc.path, nil)
		resp, body := do(t, req)
		e := wire.DecodeError(resp.StatusCode, body)
		if resp.StatusCode != tc.status || e.Code != tc.code {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, body)
		}
	}
	// The dedicated WebSocket port wants an upgrade.
	req, _ = http.NewRequest(http.MethodGet, "http"+s.WSURL()[len("ws"):]+"/", nil)
	if resp, _ := do(t, req); resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("plain GET on the WebSocket port: %d", resp.StatusCode)
	}
	// Metrics are served, with the runtime's and the process's (what an
	// operator and the soaks watch for leaks).
	req, _ = http.NewRequest(http.MethodGet, s.HTTPURL()+"/metrics", nil)
	resp, body := do(t, req)
	for _, m := range []string{"purrfly_relay_rooms", "go_goroutines ", "process_open_fds "} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), m) {
			t.Errorf("/metrics: %d, lacks %q", resp.StatusCode, m)
		}
	}
}

func TestRouterFlyReplay(t *testing.T) {
	var lastSID atomic.Value
	router := func(sid wire.SessionID, r *http.Request) wire.RouteResult {
		lastSID.Store(sid)
		if sid == "elsewhere" {
			return wire.RouteResult{Instance: "m-other"}
		}
		return wire.RouteResult{Serve: true}
	}
	s := startRelay(t, Options{Router: router})

	// Allocation of a room owned elsewhere is replayed, not performed.
	_, status, e := allocate(t, s, "elsewhere", "a")
	if status != http.StatusMisdirectedRequest || e.Code != "fly_replay" {
		t.Fatalf("allocate elsewhere: %d %v", status, e)
	}
	if s.Stats().Rooms != 0 {
		t.Fatal("a replayed allocation created a room")
	}
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL()+wire.PathRelayAllocate, nil)
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	req.Header.Set(wire.HeaderName, "elsewhere")
	if resp, _ := do(t, req); resp.Header.Get(wire.HeaderFlyReplay) != "instance=m-other" {
		t.Fatalf("Fly-Replay header %q", resp.Header.Get(wire.HeaderFlyReplay))
	}

	// WebSocket upgrades carry the session in ?s=; both ports consult the Router.
	for _, base := range []string{s.WSURL(), "ws" + s.HTTPURL()[len("http"):]} {
		hint := wire.SessionID("elsewhere").Hint()
		req, _ := http.NewRequest(http.MethodGet, "http"+base[len("ws"):]+"/?s="+hint, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		resp, _ := do(t, req)
		if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get(wire.HeaderFlyReplay) != "instance=m-other" {
			t.Fatalf("%s: %d %v", base, resp.StatusCode, resp.Header)
		}
		// A bad hint is a 400.
		req.URL.RawQuery = "s=zz"
		if resp, _ := do(t, req); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("bad hint: %d", resp.StatusCode)
		}
	}

	// Served sessions upgrade normally; the Router saw the decoded session.
	hs, _ := mustAllocate(t, s, "here")
	p := wstest.Dial(t, s.WSURL()+"/?s="+wire.SessionID("here").Hint())
	if got := p.Auth("here", hs); got != wire.Authenticated {
		t.Fatalf("auth: %d", got)
	}
	if got := lastSID.Load().(wire.SessionID); got != "here" {
		t.Fatalf("router saw %q", got)
	}
}
