package balancer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

func TestPingHeadersAndErrors(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MachineID, o.ImageRef = "m1", "img:1" })
	st, body, hdr := h.do(http.MethodGet, "/ping", nil, nil)
	var p wire.Ping
	noErr(t, decodeAnswer(t, st, body, &p))
	if p.Role != "balancer" || p.BootID != h.s.BootID() || p.Version != "v-test" || p.MachineID != "m1" || p.ImageRef != "img:1" ||
		p.InternalProtocol != wire.InternalProtocolVersion {
		t.Fatalf("ping %+v", p)
	}
	if hdr.Get("Cache-Control") != "no-store, private" || hdr.Get("Pragma") != "no-cache" || hdr.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("answer headers %v", hdr)
	}

	st, _, hdr = h.do(http.MethodOptions, "/allocate_ws", map[string]string{
		"Origin": "https://game.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "name, region, allocation_id",
	}, nil)
	if st != http.StatusNoContent || hdr.Get("Access-Control-Allow-Origin") != "*" || hdr.Get("Access-Control-Allow-Headers") != "name, region, allocation_id" {
		t.Fatalf("preflight: %d %v", st, hdr)
	}

	st, body, hdr = h.do(http.MethodGet, "/nothing-here", nil, nil)
	if st != http.StatusNotFound || !contains(body, `"not_found"`) || hdr.Get("Cache-Control") != "no-store, private" {
		t.Fatalf("unknown route: %d %s", st, body)
	}
	st, body, _ = h.do(http.MethodPost, "/join", nil, nil)
	if st != http.StatusMethodNotAllowed || !contains(body, `"method_not_allowed"`) {
		t.Fatalf("POST /join: %d %s", st, body)
	}
	for _, op := range []wire.MigrationOp{wire.OpCurrent, wire.OpAuthorize, wire.OpClaim, wire.OpActivate} {
		st, body, _ = h.do(op.Method(), op.PublicPath(), nil, nil)
		if st != http.StatusBadRequest || !contains(body, `"missing_header"`) || !contains(body, `"retryable":false`) {
			t.Fatalf("%s without headers: %d %s", op.PublicPath(), st, body)
		}
		wrong := http.MethodGet
		if op == wire.OpCurrent {
			wrong = http.MethodPost
		}
		if st, body, _ = h.do(wrong, op.PublicPath(), nil, nil); st != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s: %d %s", wrong, op.PublicPath(), st, body)
		}
	}
}

func TestServersList(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	got := h.servers()
	port, _ := strconv.Atoi(r.srv.URL[len("http://127.0.0.1:"):])
	want := wire.ServerInfo{APIEndpoint: r.info.Endpoint, Host: "eu.relay.test", RestPort: port, UDPPort: 7777, UDPPortV2: 7778, WebSocketsPort: 6942, Region: "eu"}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("servers %+v, want %+v", got, want)
	}
	_, body, _ := h.do(http.MethodGet, "/servers", nil, nil)
	for _, field := range []string{"apiEndpoint", "host", "restPort", "udpPort", "udpPortV2", "webSocketsPort", "region"} {
		if !contains(body, `"`+field+`"`) {
			t.Fatalf("/servers lacks %s: %s", field, body)
		}
	}
}

func TestListPagingAndCounts(t *testing.T) {
	h := newHarness(t, nil)
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	a.register(h)
	b.register(h)
	var pa, pb []wire.Publication
	total := 0
	for i := range 120 {
		p := pub(fmt.Sprintf("room-%03d", i), "e", 1, i%5)
		total += i % 5
		if i%2 == 0 {
			pa = append(pa, p)
		} else {
			pb = append(pb, p)
		}
	}
	a.publish(h, pa...)
	b.publish(h, pb...)

	var names []string
	for page, want := range []int{50, 50, 20, 0} {
		l := h.list(page)
		if l.Total != 120 || len(l.Results) != want {
			t.Fatalf("page %d: %d results of %d, want %d of 120", page, len(l.Results), l.Total, want)
		}
		for _, r := range l.Results {
			names = append(names, r.Name)
		}
	}
	if !sort.StringsAreSorted(names) || names[0] != "room-000" || names[119] != "room-119" {
		t.Fatalf("pages are not the rooms in name order: %v...", names[:3])
	}
	if l := h.list(0); l.Results[1].Region != "us" || l.Results[1].ConnectedPlayers != 1 {
		t.Fatalf("row %+v", l.Results[1])
	}
	st, body, _ := h.do(http.MethodGet, "/list", nil, nil)
	var l wire.ListResponse
	noErr(t, decodeAnswer(t, st, body, &l))
	if len(l.Results) != 50 {
		t.Fatal("no page parameter is not page 0")
	}
	for _, bad := range []string{"-1", "x", "99999999999999999999"} {
		st, _, _ := h.do(http.MethodGet, "/list?page="+bad, nil, nil)
		if st != http.StatusBadRequest {
			t.Fatalf("page %s: %d", bad, st)
		}
	}

	var tc wire.TotalConnections
	st, body, _ = h.do(http.MethodGet, "/getTotalConnections", nil, nil)
	noErr(t, decodeAnswer(t, st, body, &tc))
	if tc.TotalConnections != total {
		t.Fatalf("total connections %d, want %d", tc.TotalConnections, total)
	}
	// A count update moves the total; a removed relay's rooms leave it.
	a.publish(h, wire.Publication{Name: "room-000", Epoch: "e", Revision: 2, Connections: 100, ClientSecret: "c"})
	st, body, _ = h.do(http.MethodGet, "/getTotalConnections", nil, nil)
	noErr(t, decodeAnswer(t, st, body, &tc))
	if tc.TotalConnections != total+100 {
		t.Fatalf("after an update: %d, want %d", tc.TotalConnections, total+100)
	}
	b.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, DefaultHealthFailures)
	if l := h.list(0); l.Total != 60 {
		t.Fatalf("after removing a relay, list total %d, want 60", l.Total)
	}
}

func TestAdminInstances(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	r.publish(h, pub("a", "e", 1, 2), pub("b", "e", 1, 3))

	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer wrong"}, {"Authorization": testSecret}, {wire.HeaderInternalSecret: "nope"}} {
		st, body, _ := h.do(http.MethodGet, "/v1/instances", hdr, nil)
		if st != http.StatusUnauthorized || contains(body, testSecret) {
			t.Fatalf("auth %v: %d %s", hdr, st, body)
		}
	}
	st, body, _ := h.do(http.MethodGet, "/v1/instances", map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	var resp wire.InstancesResponse
	noErr(t, decodeAnswer(t, st, body, &resp))
	if len(resp.Instances) != 1 {
		t.Fatalf("instances %+v", resp)
	}
	in := resp.Instances[0]
	if in.BootID != r.boot() || in.MachineID != r.info.MachineID || in.Region != "eu" || in.Endpoint != r.info.Endpoint ||
		in.Host != "eu.relay.test" || in.Status != "live" || in.Rooms != 2 || in.Connections != 5 || in.LastHeartbeat != "2026-01-01T00:00:00Z" {
		t.Fatalf("instance %+v", in)
	}
	var raw map[string][]map[string]any
	_ = json.Unmarshal(body, &raw)
	for _, k := range []string{"bootId", "machineId", "region", "endpoint", "host", "status", "rooms", "connections", "lastHeartbeat"} {
		if _, ok := raw["instances"][0][k]; !ok {
			t.Fatalf("instance JSON lacks %s: %s", k, body)
		}
	}

	st, body, _ = h.do(http.MethodPost, "/v1/instances/"+r.info.MachineID+"/drain", map[string]string{wire.HeaderInternalSecret: testSecret}, nil)
	var drained wire.Instance
	noErr(t, decodeAnswer(t, st, body, &drained))
	if drained.Status != "draining" || drained.BootID != r.boot() {
		t.Fatalf("drain answered %+v", drained)
	}
	// The mark holds across heartbeats of the same boot.
	r.register(h)
	st, body, _ = h.do(http.MethodGet, "/v1/instances", map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	noErr(t, decodeAnswer(t, st, body, &resp))
	if resp.Instances[0].Status != "draining" {
		t.Fatalf("after a heartbeat: %+v", resp.Instances[0])
	}
	// A new boot on the endpoint is live again.
	if _, err := r.registerAs(h, r.restart()); err != nil {
		t.Fatal(err)
	}
	st, body, _ = h.do(http.MethodGet, "/v1/instances", map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	noErr(t, decodeAnswer(t, st, body, &resp))
	if resp.Instances[0].Status != "live" || resp.Instances[0].Rooms != 0 {
		t.Fatalf("new boot: %+v", resp.Instances[0])
	}

	st, _, _ = h.do(http.MethodPost, "/v1/instances/unknown/drain", map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	if st != http.StatusNotFound {
		t.Fatalf("drain of an unknown instance: %d", st)
	}
	st, _, _ = h.do(http.MethodGet, "/v1/instances/"+r.boot()+"/drain", map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	if st != http.StatusMethodNotAllowed {
		t.Fatalf("GET drain: %d", st)
	}
	st, _, _ = h.do(http.MethodPost, "/v1/instances/"+r.boot()+"/drain", nil, nil)
	if st != http.StatusUnauthorized {
		t.Fatalf("drain without auth: %d", st)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	if _, err := h.allocate("m", "eu", "a"); err != nil {
		t.Fatal(err)
	}
	st, body, _ := h.do(http.MethodGet, "/metrics", nil, nil)
	if st != http.StatusOK {
		t.Fatalf("metrics: %d", st)
	}
	for _, m := range []string{`purrfly_balancer_allocations_total{result="ok"} 1`, "purrfly_balancer_relays 1", "purrfly_balancer_rooms 1", "purrfly_balancer_relay_call_duration_seconds",
		"go_goroutines ", "process_open_fds "} {
		if !contains(body, m) {
			t.Fatalf("metrics lack %q", m)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, secret := range []string{"", "has space", "tab\tx"} {
		if _, err := New(Options{Secret: secret}); err == nil {
			t.Fatalf("secret %q accepted", secret)
		} else if contains([]byte(err.Error()), secret) && secret != "" {
			t.Fatalf("error echoes the secret: %v", err)
		}
	}
	if _, err := New(Options{Secret: "ok", Port: 70000}); err == nil {
		t.Fatal("port 70000 accepted")
	}
	s, err := New(Options{Secret: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if s.BootID() == "" || s.opts.HealthInterval != DefaultHealthInterval || s.opts.RelayExpiry != 90*1e9 {
		t.Fatalf("defaults: %+v", s.opts)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close before Start: %v", err)
	}
}
