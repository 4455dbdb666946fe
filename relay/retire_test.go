package relay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// retire calls the relay's retire route as a deploy does.
func retire(t *testing.T, s *Server, boot string, by time.Time) (wire.RetireStatus, int) {
	t.Helper()
	body, _ := json.Marshal(wire.RetireRequest{BootID: boot, RetireBy: by})
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL()+wire.PathRelayRetire, bytes.NewReader(body))
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	resp, b := do(t, req)
	var st wire.RetireStatus
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
	}
	return st, resp.StatusCode
}

func retiredYet(s *Server) bool {
	select {
	case <-s.Retired():
		return true
	default:
		return false
	}
}

// TestRetireKeepsGamesAndTakesNoRoom: a retired relay refuses a new room
// with relay_retiring (an exact replay still answers), says so at /ping
// and in a heartbeat sent at once, keeps its game playing, and is retired
// (Retired closes, new sessions refused) once the game has ended and its
// room is gone, not before. A retire call for another boot is refused.
func TestRetireKeepsGamesAndTakesNoRoom(t *testing.T) {
	fb := newFakeBalancer(t)
	clk := clock.NewFake(time.Unix(2_000_000, 0))
	s := startRelay(t, Options{BalancerURL: fb.srv.URL, Clock: clk, BootID: "boot-old", HeartbeatInterval: 30 * time.Second})
	waitFor(t, "first heartbeat", func() bool { return s.reg.beats.Load() == 1 })
	a, _, _ := allocate(t, s, "game", "id-game")
	host := join(t, s, "game", a.Capability.Secret)
	cl := join(t, s, "game", a.Publication.ClientSecret)
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]

	if _, code := retire(t, s, "another-boot", clk.Now().Add(time.Hour)); code != http.StatusConflict {
		t.Fatalf("retire naming another boot: %d, want 409 stale_boot", code)
	}
	by := clk.Now().Add(time.Hour)
	st, code := retire(t, s, "boot-old", by)
	if code != http.StatusOK || !st.Retiring || !st.RetireBy.Equal(by) || st.Rooms != 1 || st.Connections != 2 {
		t.Fatalf("retire: %d %+v", code, st)
	}
	if st, _ := retire(t, s, "boot-old", by.Add(time.Hour)); !st.RetireBy.Equal(by) {
		t.Fatalf("a later retireBy moved the deadline: %+v", st)
	}
	waitFor(t, "a heartbeat saying retiring", func() bool {
		return fb.counts().registers >= 2 && fb.lastRegister().Retiring && fb.lastRegister().RetireBy.Equal(by)
	})
	if _, code, e := allocate(t, s, "new", "id-new"); code != http.StatusServiceUnavailable || e.Code != wire.ErrRetiring.Code {
		t.Fatalf("a new room on a retiring relay: %d %v", code, e)
	}
	if b, code, _ := allocate(t, s, "game", "id-game"); code != http.StatusOK || !b.Replayed {
		t.Fatalf("an exact replay on a retiring relay: %d %+v", code, b)
	}
	var p wire.Ping
	resp, body := do(t, mustRequest(t, http.MethodGet, s.HTTPURL()+"/ping"))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &p) != nil || !p.Retiring || !p.RetireBy.Equal(by) {
		t.Fatalf("/ping of a retiring relay: %d %s", resp.StatusCode, body)
	}

	// The game plays on, for many ticks.
	for range 3 {
		clk.Advance(retireTick)
		host.Send(sendOne(id, "still here"))
		if got := cl.Recv(); !equal(got, "still here") {
			t.Fatalf("client got %q", got)
		}
	}
	if retiredYet(s) {
		t.Fatal("retired while its game plays")
	}
	_ = cl.WS.Close(websocket.StatusNormalClosure, "")
	host.ExpectToHost(wire.ToHostDisconnected)
	_ = host.WS.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the room to end", func() bool { return s.Stats().Rooms == 0 && s.Stats().Connections == 0 })
	waitFor(t, "retired", func() bool {
		clk.Advance(retireTick)
		return retiredYet(s)
	})
	if overdue, _ := s.RetireStats(); overdue {
		t.Fatal("retired by its deadline, want by its last game")
	}
	if !s.admitSession() {
		return
	}
	s.sessions.Done()
	t.Fatal("a retired relay still admits sessions")
}

// TestRetireDeadlineClosesWith1012: what still plays when RetireBy passes
// is closed with 1012 and reported; a vacant room nobody is connected to
// is released once its players' recovery window is over, well before the
// empty-room timeout.
func TestRetireDeadlineClosesWith1012(t *testing.T) {
	clk := clock.NewFake(time.Unix(2_000_000, 0))
	s := startRelay(t, Options{Clock: clk, EmptyRoomTimeout: time.Hour, ActivationLease: 10 * time.Second})
	vacant, _, _ := allocate(t, s, "vacant", "id-v")
	vh := join(t, s, "vacant", vacant.Capability.Secret)
	vc := join(t, s, "vacant", vacant.Publication.ClientSecret)
	vh.ExpectToHost(wire.ToHostConnected)
	_ = vh.WS.Close(websocket.StatusNormalClosure, "") // the host leaves: vacant, reserved for a migration
	if code := vc.Closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("client of the vacant room: %v", code)
	}
	a, _, _ := allocate(t, s, "long", "id-long")
	host := join(t, s, "long", a.Capability.Secret)
	cl := join(t, s, "long", a.Publication.ClientSecret)
	host.ExpectToHost(wire.ToHostConnected)
	waitFor(t, "two rooms, two connections", func() bool { return s.Stats() == Stats{Rooms: 2, Connections: 2} })

	if _, err := s.Retire(clk.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Second)
	waitFor(t, "the vacant room released", func() bool {
		clk.Advance(0)
		return s.core.Room("vacant") == nil
	})
	if retiredYet(s) {
		t.Fatal("retired while a game plays")
	}
	clk.Advance(20 * time.Second)
	if code := cl.Closed(); code != websocket.StatusServiceRestart {
		t.Fatalf("client at the retire deadline: %v, want 1012", code)
	}
	if code := host.Closed(); code != websocket.StatusServiceRestart {
		t.Fatalf("host at the retire deadline: %v, want 1012", code)
	}
	waitFor(t, "retired", func() bool { return retiredYet(s) })
	if overdue, left := s.RetireStats(); !overdue || left.Rooms != 1 || left.Connections != 2 {
		t.Fatalf("RetireStats: overdue %v, closed %+v; want the long game's room and 2 connections", overdue, left)
	}
	if v := counterValue(s.retireM.closed); v != 2 {
		t.Fatalf("retire_closed_connections_total %v, want 2", v)
	}
}

// TestRetiringSendsPublicUpgradesElsewhere: a retiring machine of a
// multi-machine app answers a public upgrade without a hint, or with the
// hint of a room it does not hold, with Fly-Replay elsewhere (prefer
// self), and serves one for its own room or one replayed already.
func TestRetiringSendsPublicUpgradesElsewhere(t *testing.T) {
	b := newMeshBalancer(t)
	s := startRelay(t, Options{BalancerURL: b.srv.URL, MultiMachine: true, MachineID: "m-old"})
	waitFor(t, "registered", func() bool { return s.reg.beats.Load() >= 1 })
	allocateOn(t, s, "mine")
	if _, err := s.Retire(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	upgrade := func(query string, replayed bool) (int, string) {
		req := mustRequest(t, http.MethodGet, s.HTTPURL()+"/"+query)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if replayed {
			req.Header.Set(wire.HeaderFlyReplaySrc, "instance=m-other;region=ams;t=1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close() // a 101's body is the connection: not read
		return resp.StatusCode, resp.Header.Get(wire.HeaderFlyReplay)
	}
	if code, fr := upgrade("", false); code != http.StatusMisdirectedRequest || fr != "elsewhere=true;fallback=prefer_self" {
		t.Fatalf("hintless upgrade on a retiring machine: %d %q", code, fr)
	}
	if code, fr := upgrade("?"+wire.SessionQueryParam+"="+wire.SessionID("other-room").Hint(), false); code != http.StatusMisdirectedRequest || !strings.Contains(fr, "elsewhere") {
		t.Fatalf("another room's upgrade on a retiring machine: %d %q", code, fr)
	}
	if code, fr := upgrade("?"+wire.SessionQueryParam+"="+wire.SessionID("mine").Hint(), false); code != http.StatusSwitchingProtocols || fr != "" {
		t.Fatalf("its own room's upgrade: %d %q", code, fr)
	}
	if code, fr := upgrade("", true); code != http.StatusSwitchingProtocols || fr != "" {
		t.Fatalf("a replayed upgrade: %d %q", code, fr)
	}
}

// TestReachableAfterTheProxyRoutesHere: a relay with a ReachableURL says
// in its heartbeats that players cannot reach it until the public URL,
// asked to prefer its machine, answers with its boot; then it says so in
// a heartbeat at once, not at the next interval.
func TestReachableAfterTheProxyRoutesHere(t *testing.T) {
	fb := newFakeBalancer(t)
	var routed atomic.Bool
	var preferred sync.Map
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		preferred.Store(r.Header.Get(wire.HeaderFlyPreferInstance), true)
		boot := "some-other-machine"
		if routed.Load() {
			boot = "boot-new"
		}
		wire.WriteJSON(w, http.StatusOK, wire.Ping{Role: "relay", BootID: boot})
	}))
	t.Cleanup(proxy.Close)
	s := startRelay(t, Options{BalancerURL: fb.srv.URL, BootID: "boot-new", MachineID: "m-new",
		ReachableURL: proxy.URL, HeartbeatInterval: time.Hour})
	waitFor(t, "first heartbeat", func() bool { return s.reg.beats.Load() >= 1 })
	if !fb.lastRegister().Unreachable {
		t.Fatal("the first heartbeat of a relay the proxy does not route to yet says it is reachable")
	}
	if _, ok := preferred.Load("m-new"); !ok {
		waitFor(t, "a probe preferring this machine", func() bool { _, ok := preferred.Load("m-new"); return ok })
	}
	routed.Store(true)
	waitFor(t, "a heartbeat saying reachable", func() bool { return !fb.lastRegister().Unreachable })
}

// TestBootWatchRegistersWithANewBalancer: when the balancer's boot watch
// says it stops and a new boot answers, the relay registers with it at
// once, without waiting for its heartbeat interval.
func TestBootWatchRegistersWithANewBalancer(t *testing.T) {
	fb := newFakeBalancer(t)
	release := make(chan struct{})
	fb.bootWatch = func(w http.ResponseWriter, r *http.Request) {
		fb.mu.Lock()
		boot := fb.boot
		fb.mu.Unlock()
		if r.URL.Query().Get("known") == boot {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		wire.WriteJSON(w, http.StatusOK, wire.BalancerBoot{BalancerBoot: boot})
	}
	s := startRelay(t, Options{BalancerURL: fb.srv.URL, HeartbeatInterval: time.Hour})
	waitFor(t, "first heartbeat", func() bool { return s.reg.beats.Load() >= 1 && fb.counts().publishes >= 1 })
	fb.restart("balancer-2")
	close(release) // the held watch answers: the boot it names is new
	waitFor(t, "registration with the new balancer", func() bool {
		known, _ := s.reg.watch.current()
		return fb.counts().registers >= 2 && known == "balancer-2"
	})
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// FuzzRetireRequest: the body of a retire call. The relay answers a
// purrfly error (never a 500) or, for its own boot, its retirement; an
// answer of 200 names this boot retiring with a latest stop no further
// than wire.MaxRetireAfter.
func FuzzRetireRequest(f *testing.F) {
	f.Add([]byte(`{"bootId":"boot-fuzz","retireBy":"2030-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"bootId":"boot-fuzz","retireBy":"1970-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"bootId":"boot-fuzz","retireBy":"9999-12-31T23:59:59Z"}`))
	f.Add([]byte(`{"bootId":"other","retireBy":"2030-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"bootId":""}`))
	f.Add([]byte(`{"retireBy":"yesterday"}`))
	f.Add([]byte(`[]`))
	clk := clock.NewFake(time.Unix(2_000_000_000, 0))
	s := startRelay(f, Options{Clock: clk, BootID: "boot-fuzz"})
	h := s.mainHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, wire.PathRelayRetire, bytes.NewReader(body))
		wire.SetInternal(req.Header, testSecret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code == http.StatusInternalServerError {
			t.Fatalf("%q: 500 %s", body, w.Body.Bytes())
		}
		if w.Code != http.StatusOK {
			var e wire.Error
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Code == "" {
				t.Fatalf("%q: %d is not a purrfly error: %s", body, w.Code, w.Body.Bytes())
			}
			return
		}
		var st wire.RetireStatus
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.BootID != "boot-fuzz" || !st.Retiring ||
			st.RetireBy.After(clk.Now().Add(wire.MaxRetireAfter)) {
			t.Fatalf("%q: %s", body, w.Body.Bytes())
		}
	})
}
