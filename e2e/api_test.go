package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/relay"
	"github.com/purrfly/purrfly/wire"
)

// TestJoin: /join answers the client credential (not the host's) on the
// room's relay; a client connects with it and the host sees it. An unknown
// room is 404 room_not_found.
func TestJoin(t *testing.T) {
	s := startDev(t, nil)
	o := allocHost(t, s.api, "us", "joinme")
	c, err := s.api.Join(tctx(t), "joinme")
	if err != nil {
		t.Fatal(err)
	}
	if c.Secret == o.hostCap.Secret || c.Host != o.hostCap.Host || c.Port != o.hostCap.Port || c.UDPPortV2 != o.hostCap.UDPPortV2 || c.SSL != o.hostCap.SSL {
		t.Fatalf("join capability %+v vs host's %+v: want the same relay and another secret", redact(c), redact(o.hostCap))
	}
	cl, err := client.DialClient(tctx(t), c, "joinme", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseNow()
	ids := expectConnected(t, o.host)
	roundTrip(t, o.host, cl, ids[0], "join")

	_, err = s.api.Join(tctx(t), "no-such-room")
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != "room_not_found" || we.Status != http.StatusNotFound {
		t.Fatalf("join unknown room: %v, want 404 room_not_found", err)
	}
	// The host credential does not make a client of someone else's room.
	if _, err := client.DialClient(tctx(t), wire.Capability{Host: c.Host, Port: c.Port, UDPPortV2: c.UDPPortV2, Secret: "wrong"}, "joinme", nil); !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("client with a wrong secret: %v, want ErrAuthFailed", err)
	}
}

// TestListPaging: /list pages count from 0 (as the original PurrBalancer's
// page*50), 50 rooms a page ordered by name, with the total on every page.
func TestListPaging(t *testing.T) {
	s := startDev(t, nil)
	const n = 120
	var g errgroup.Group
	g.SetLimit(8)
	for i := 0; i < n; i++ {
		g.Go(func() error {
			region := []string{"eu", "us"}[i%2]
			_, err := s.api.Allocate(tctx(t), region, roomName("list", i), client.NewAllocationID())
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		page, from, count int
	}{{0, 0, 50}, {1, 50, 50}, {2, 100, 20}, {3, 0, 0}, {1000, 0, 0}} {
		l, err := s.api.List(tctx(t), tc.page)
		if err != nil {
			t.Fatalf("page %d: %v", tc.page, err)
		}
		if l.Total != n || len(l.Results) != tc.count {
			t.Fatalf("page %d: total %d, %d results; want %d and %d", tc.page, l.Total, len(l.Results), n, tc.count)
		}
		for j, r := range l.Results {
			i := tc.from + j
			if want := roomName("list", i); r.Name != want || r.Region != []string{"eu", "us"}[i%2] || r.ConnectedPlayers != 0 {
				t.Fatalf("page %d row %d = %+v, want %s in %s with 0 players", tc.page, j, r, want, []string{"eu", "us"}[i%2])
			}
		}
	}
	// No page parameter is page 0; a bad one is a JSON 400.
	a := do(t, http.MethodGet, s.bal.URL()+"/list", nil, nil)
	if a.status != 200 || !strings.Contains(string(a.body), roomName("list", 0)) || strings.Contains(string(a.body), roomName("list", 50)) {
		t.Fatalf("/list without page: %d %.200s", a.status, a.body)
	}
	for _, bad := range []string{"-1", "x", "1.5"} {
		a := do(t, http.MethodGet, s.bal.URL()+"/list?page="+bad, nil, nil)
		if e := a.wireErr(t); a.status != http.StatusBadRequest || e.Code != "bad_request" {
			t.Fatalf("/list?page=%s: %d %s, want 400 bad_request", bad, a.status, a.body)
		}
	}
}

// TestCountsFollowConnectsAndLeaves: /list connectedPlayers (host included,
// as PurrLay counts) and /getTotalConnections follow every connect and
// leave promptly (a publication, well within a heartbeat or two).
func TestCountsFollowConnectsAndLeaves(t *testing.T) {
	s := startDev(t, nil)
	counts := func(room string, players, total int) {
		t.Helper()
		var got wire.RoomSummary
		var tot int
		testutil.Eventually(t, 2*time.Second, "counts "+room, func() bool {
			got = listAll(t, s.api)[room]
			var err error
			tot, err = s.api.TotalConnections(tctx(t))
			return err == nil && got.ConnectedPlayers == players && tot == total
		})
	}
	o := allocHost(t, s.api, "eu", "counted")
	counts("counted", 1, 1)
	var cls []*client.Client
	for i := 0; i < 3; i++ {
		cls = append(cls, joinClient(t, s.api, "counted"))
		expectConnected(t, o.host)
	}
	counts("counted", 4, 4)
	other := allocHost(t, s.api, "us", "counted-too")
	joinClient(t, s.api, "counted-too")
	expectConnected(t, other.host)
	counts("counted-too", 2, 6)

	if err := cls[0].Close(); err != nil {
		t.Fatal(err)
	}
	p := next(t, o.host)
	if p.Type != wire.ToHostDisconnected {
		t.Fatalf("host got type %d, want a disconnect notice", p.Type)
	}
	counts("counted", 3, 5)
	if err := o.host.Close(); err != nil {
		t.Fatal(err)
	}
	// The host leaving disconnects both clients; the room stays with 0.
	counts("counted", 0, 2)
}

// TestServersFields: /servers lists every relay with PurrNet's fields.
func TestServersFields(t *testing.T) {
	s := startDev(t, nil)
	a := do(t, http.MethodGet, s.bal.URL()+"/servers", nil, nil)
	for _, f := range []string{"apiEndpoint", "host", "restPort", "udpPort", "udpPortV2", "webSocketsPort", "region"} {
		if !strings.Contains(string(a.body), `"`+f+`"`) {
			t.Fatalf("/servers lacks field %s: %s", f, a.body)
		}
	}
	servers, err := s.api.Servers(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != len(s.relays) {
		t.Fatalf("/servers lists %d relays, want %d", len(servers), len(s.relays))
	}
	byEndpoint := map[string]wire.ServerInfo{}
	for _, sv := range servers {
		byEndpoint[sv.APIEndpoint] = sv
	}
	for i, r := range s.relays {
		sv, ok := byEndpoint[r.HTTPURL()]
		want := []string{"eu", "us"}[i]
		if !ok || sv.Host != "127.0.0.1" || sv.Region != want || sv.WebSocketsPort != portOf(t, r.WSURL()) ||
			sv.RestPort != portOf(t, r.HTTPURL()) || sv.UDPPort != portOf(t, "udp://"+r.UDP1Addr()) || sv.UDPPortV2 != portOf(t, "udp://"+r.UDPAddr()) {
			t.Fatalf("/servers entry for %s = %+v (found %v)", r.HTTPURL(), sv, ok)
		}
		// PurrNet pings apiEndpoint to pick the fastest region.
		if _, _, err := s.api.Ping(tctx(t), sv.APIEndpoint); err != nil {
			t.Fatalf("ping %s: %v", sv.APIEndpoint, err)
		}
	}
	if best, _, err := s.api.Fastest(tctx(t), servers); err != nil || best.Region == "" {
		t.Fatalf("Fastest = %+v, %v", best, err)
	}
}

// TestPingFields: relay and balancer /ping answer 200 with bootId, version,
// region, machineId and imageRef.
func TestPingFields(t *testing.T) {
	b := newBalancer(t, 0, func(o *balancer.Options) {
		o.MachineID, o.ImageRef, o.Version, o.Region = "bal-machine", "registry.fly.io/bal:1", "v-bal", "ams"
	})
	r := newRelay(t, b.URL(), "fra", func(o *relay.Options) {
		o.MachineID, o.ImageRef, o.Version = "relay-machine", "registry.fly.io/relay:2", "v-relay"
	})
	api := newAPI(t, b.URL())
	for _, tc := range []struct {
		name, url string
		want      wire.Ping
	}{
		{"balancer", b.URL(), wire.Ping{Role: "balancer", BootID: b.BootID(), Version: "v-bal", Region: "ams", MachineID: "bal-machine", ImageRef: "registry.fly.io/bal:1", InternalProtocol: wire.InternalProtocolVersion}},
		{"relay", r.HTTPURL(), wire.Ping{Role: "relay", BootID: r.BootID(), Version: "v-relay", Region: "fra", MachineID: "relay-machine", ImageRef: "registry.fly.io/relay:2", InternalProtocol: wire.InternalProtocolVersion}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, http.MethodGet, tc.url+"/ping", nil, nil)
			for _, f := range []string{"bootId", "version", "region", "machineId", "imageRef"} {
				if a.status != 200 || !strings.Contains(string(a.body), `"`+f+`"`) {
					t.Fatalf("/ping = %d %s: want 200 with %s", a.status, a.body, f)
				}
			}
			p, _, err := api.Ping(tctx(t), tc.url)
			if err != nil || p != tc.want || p.BootID == "" {
				t.Fatalf("/ping = %+v, %v; want %+v", p, err, tc.want)
			}
		})
	}
}

// TestCORSAndNoStore: every answer of relay and balancer (successes, errors,
// preflights) carries no-store and CORS; OPTIONS preflights allow PurrNet's
// headers and POST.
func TestCORSAndNoStore(t *testing.T) {
	s := startDev(t, nil, "eu")
	r := s.relays[0]
	b := s.bal.URL()
	alloc := map[string]string{"region": "eu", "name": "cors", "allocation_id": client.NewAllocationID()}
	for _, tc := range []struct {
		name, method, url string
		headers           map[string]string
		status            int
	}{
		{"balancer ping", "GET", b + "/ping", nil, 200},
		{"balancer servers", "GET", b + "/servers", nil, 200},
		{"balancer allocate", "POST", b + "/allocate_ws", alloc, 200},
		{"balancer join", "GET", b + "/join", map[string]string{"name": "cors"}, 200},
		{"balancer join unknown", "GET", b + "/join", map[string]string{"name": "nope"}, 404},
		{"balancer list", "GET", b + "/list?page=0", nil, 200},
		{"balancer total", "GET", b + "/getTotalConnections", nil, 200},
		{"balancer unknown route", "GET", b + "/nope", nil, 404},
		{"balancer wrong method", "DELETE", b + "/join", nil, 405},
		{"relay ping", "GET", r.HTTPURL() + "/ping", nil, 200},
		{"relay unknown route", "GET", r.HTTPURL() + "/nope", nil, 404},
		{"relay ws port without upgrade", "GET", strings.Replace(r.WSURL(), "ws://", "http://", 1), nil, 426},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, tc.method, tc.url, tc.headers, nil)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %.200s", a.status, tc.status, a.body)
			}
			checkCommonHeaders(t, a)
			if a.status >= 400 {
				a.wireErr(t)
			}
		})
	}
	for _, base := range []string{b, r.HTTPURL()} {
		for _, path := range []string{"/allocate_ws", "/join", "/ping", "/list"} {
			a := do(t, http.MethodOptions, base+path, map[string]string{
				"Origin":                         "https://game.example",
				"Access-Control-Request-Method":  "POST",
				"Access-Control-Request-Headers": "region,name,allocation_id,cache-control",
			}, nil)
			if a.status != http.StatusNoContent && a.status != http.StatusOK {
				t.Fatalf("preflight %s%s: %d", base, path, a.status)
			}
			checkCommonHeaders(t, a)
			methods := a.header.Get("Access-Control-Allow-Methods")
			allowed := strings.ToLower(a.header.Get("Access-Control-Allow-Headers"))
			if !strings.Contains(methods, "POST") || !strings.Contains(methods, "GET") ||
				(allowed != "*" && !(strings.Contains(allowed, "allocation_id") && strings.Contains(allowed, "region") && strings.Contains(allowed, "name"))) {
				t.Fatalf("preflight %s%s: methods %q headers %q", base, path, methods, allowed)
			}
		}
	}
}

func checkCommonHeaders(t testing.TB, a answer) {
	t.Helper()
	checkCacheHeaders(t, a, "*")
}

// checkCacheHeaders is checkCommonHeaders with the CORS origin expected:
// "*" on the public routes, "" on /v1 (off unless ADMIN_CORS_ORIGINS).
func checkCacheHeaders(t testing.TB, a answer, acao string) {
	t.Helper()
	if a.header.Get("Cache-Control") != "no-store, private" || a.header.Get("Pragma") != "no-cache" ||
		a.header.Get("Access-Control-Allow-Origin") != acao {
		t.Fatalf("headers Cache-Control=%q Pragma=%q ACAO=%q; want no-store, private / no-cache / %q",
			a.header.Get("Cache-Control"), a.header.Get("Pragma"), a.header.Get("Access-Control-Allow-Origin"), acao)
	}
}
