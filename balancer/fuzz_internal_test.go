package balancer

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/wire"
)

// FuzzInternalRequests sends arbitrary JSON bodies (with the right secret)
// to the relay -> balancer routes, in process: register, publish,
// unregister, and the room location query. Whatever they hold, the answer
// is purrfly JSON, never a 500; a registration is accepted only when the
// relay's info obeys its documented bounds, and publish and unregister
// answer one result per room, in order.
func FuzzInternalRequests(f *testing.F) {
	reg, _ := json.Marshal(wire.RegisterRequest{Relay: fuzzRelayInfo, Connections: 3, Rooms: 1, HeartbeatSeconds: 30})
	f.Add(uint8(0), reg)
	f.Add(uint8(0), []byte(`{"relay":{"bootId":"relay-boot","endpoint":"https://r.example","host":"h","port":443,"udpPortV2":7778,"udpPort":-1}}`))
	f.Add(uint8(0), []byte(`{"relay":{"bootId":"other-boot","endpoint":"http://10.0.0.9:8080","host":"h","port":1,"udpPortV2":1}}`))
	f.Add(uint8(0), []byte(`{"relay":{"bootId":"relay-boot","endpoint":"http://[::1]:80/x?y","host":"h","port":1,"udpPortV2":1}} trailing`))
	pub, _ := json.Marshal(wire.PublishRequest{BootID: "relay-boot", Endpoint: fuzzRelayInfo.Endpoint, Snapshot: true,
		Rooms: []wire.Publication{{Name: "room-1", Epoch: "e1", Revision: 2, Connections: 1, ClientSecret: "c", AllocationID: "a"}, {Name: "room-2", Epoch: "e2", Revision: 1, ClientSecret: "c", Vacant: true}}})
	f.Add(uint8(1), pub)
	f.Add(uint8(1), []byte(`{"bootId":"relay-boot","endpoint":"http://10.0.0.1:8080","rooms":[{"name":"room-1","epoch":"e1","revision":3,"clientSecret":"c","movedFrom":{"bootId":"b0","epoch":"e0"}}]}`))
	unreg, _ := json.Marshal(wire.UnregisterRequest{BootID: "relay-boot", Endpoint: fuzzRelayInfo.Endpoint, Rooms: []wire.Removal{{Name: "room-1", Epoch: "e1", Revision: 3}}})
	f.Add(uint8(2), unreg)
	f.Add(uint8(3), []byte("room-1"))
	f.Add(uint8(3), []byte(""))
	f.Add(uint8(1), []byte(`{"rooms":[{"name":""}]}`))
	f.Add(uint8(2), []byte(`[]`))

	s, _ := newFuzzBalancer(f)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		var req *http.Request
		switch route % 4 {
		case 0:
			req = httptest.NewRequest(http.MethodPost, wire.PathRegister, bytes.NewReader(body))
		case 1:
			req = httptest.NewRequest(http.MethodPost, wire.PathPublish, bytes.NewReader(body))
		case 2:
			req = httptest.NewRequest(http.MethodPost, wire.PathUnregister, bytes.NewReader(body))
		default:
			req = httptest.NewRequest(http.MethodGet, wire.PathRoomLocation+"?name="+url.QueryEscape(string(body)), nil)
		}
		wire.SetInternal(req.Header, testSecret)
		status, out := serveFuzz(t, h, req)
		if status != http.StatusOK {
			return
		}
		decode := func(v any) {
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(v); err != nil {
				t.Fatalf("accepted %q: %v", body, err)
			}
		}
		switch route % 4 {
		case 0:
			var rr wire.RegisterRequest
			decode(&rr)
			i := rr.Relay
			u, err := url.Parse(i.Endpoint)
			if i.BootID == "" || len(i.BootID) > maxIDLen || err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" ||
				i.Host == "" || i.Port < 1 || i.Port > 65535 || i.UDPPortV2 < 1 || i.UDPPortV2 > 65535 || i.UDPPort < 0 || i.UDPPort > 65535 ||
				rr.Connections < 0 || rr.Rooms < 0 || rr.HeartbeatSeconds < 0 {
				t.Fatalf("registered %+v", rr)
			}
		case 1, 2:
			var in struct {
				Rooms []struct{ Name, Epoch string } `json:"rooms"`
			}
			decode(&in)
			var res struct {
				Results []struct{ Name, Epoch, Status string } `json:"results"`
			}
			if err := json.Unmarshal(out, &res); err != nil || len(res.Results) != len(in.Rooms) {
				t.Fatalf("%d rooms, answer %s", len(in.Rooms), out)
			}
			for i, r := range res.Results {
				if r.Name != in.Rooms[i].Name || r.Epoch != in.Rooms[i].Epoch || r.Status == "" {
					t.Fatalf("result %d %+v for room %+v", i, r, in.Rooms[i])
				}
			}
		default:
			var loc wire.RoomLocation
			if err := json.Unmarshal(out, &loc); err != nil || loc.Name != string(body) || loc.BootID == "" {
				t.Fatalf("location of %q: %s", body, out)
			}
		}
	})
}

// fuzzRelayInfo is the relay the fuzz balancers know (its /ping, answered
// by fakeRelayTransport, proves relay-boot at any endpoint).
var fuzzRelayInfo = wire.RelayInfo{BootID: "relay-boot", Endpoint: "http://10.0.0.1:8080", Host: "relay.example",
	Region: "eu", Port: 443, UDPPort: 7777, UDPPortV2: 7778, SSL: true}

// fuzzRelay answers the balancer's calls to relays in process: /ping
// proves relay-boot and an allocation gets a well-formed room, unless
// answer is set: then it answers every call.
type fuzzRelay struct {
	mu     sync.Mutex
	answer func(r *http.Request) (int, []byte)
}

func (fr *fuzzRelay) RoundTrip(r *http.Request) (*http.Response, error) {
	fr.mu.Lock()
	answer := fr.answer
	fr.mu.Unlock()
	status, body := http.StatusOK, []byte(`{"role":"relay","bootId":"relay-boot"}`)
	if answer != nil {
		status, body = answer(r)
	} else if r.URL.Path != "/ping" {
		{
			body, _ = json.Marshal(wire.RelayAllocation{
				Capability:  wire.Capability{Host: "ignored", Secret: "host-secret", Port: 443, UDPPortV2: 7778},
				Publication: wire.Publication{Name: r.Header.Get(wire.HeaderName), Epoch: "e-" + r.Header.Get(wire.HeaderAllocationID), Revision: 1, ClientSecret: "client-secret"},
				BootID:      "relay-boot",
			})
		}
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
}

// newFuzzBalancer is a balancer that is never started (no listener, no
// loops): requests go to its Handler, its relay calls to a fuzzRelay,
// and fuzzRelayInfo is registered.
func newFuzzBalancer(tb testing.TB) (*Server, *fuzzRelay) { return newFuzzBalancerWith(tb, nil) }

// newFuzzBalancerWith is newFuzzBalancer with mod applied to the options.
func newFuzzBalancerWith(tb testing.TB, mod func(*Options)) (*Server, *fuzzRelay) {
	tb.Helper()
	fr := &fuzzRelay{}
	o := Options{Secret: testSecret, BootID: "balancer-boot", Logger: slog.New(slog.DiscardHandler),
		AllocateRate: limit.Rate{Every: -1}, JoinRate: limit.Rate{Every: -1}, MaxRoomsPerSource: -1, // every input from one address
		HTTPClient: &http.Client{Transport: fr}}
	if mod != nil {
		mod(&o)
	}
	s := newChecked(tb, o)
	body, _ := json.Marshal(wire.RegisterRequest{Relay: fuzzRelayInfo})
	req := httptest.NewRequest(http.MethodPost, wire.PathRegister, bytes.NewReader(body))
	wire.SetInternal(req.Header, testSecret)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		tb.Fatalf("register: %d %s", w.Code, w.Body)
	}
	return s, fr
}

// serveFuzz serves req and checks what every answer must be: JSON, not
// a 500, and an error in the purrfly shape unless it is a 200.
func serveFuzz(t *testing.T, h http.Handler, req *http.Request) (int, []byte) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	out := w.Body.Bytes()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" || !json.Valid(out) {
		t.Fatalf("%s %s: %d %q %q", req.Method, req.URL, w.Code, ct, out)
	}
	if w.Code == http.StatusInternalServerError {
		t.Fatalf("%s %s: 500 %s", req.Method, req.URL, out)
	}
	if w.Code != http.StatusOK {
		if e := wire.DecodeError(w.Code, out); strings.HasPrefix(e.Code, "http_") {
			t.Fatalf("%s %s: %d is not a purrfly error: %s", req.Method, req.URL, w.Code, out)
		}
	}
	return w.Code, out
}
