package balancer

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/wire"
)

// memTransport serves client requests with an in-memory handler: no network.
type memTransport struct{ h http.Handler }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// newMemSetup builds a balancer (not started) whose relay calls reach an
// in-memory fake relay, registered through the balancer's own handler.
func newMemSetup(tb testing.TB) (*Server, *fakeRelay) {
	tb.Helper()
	return newMemSetupWith(tb, nil)
}

// newMemSetupWith is newMemSetup with mod applied to the options.
func newMemSetupWith(tb testing.TB, mod func(*Options)) (*Server, *fakeRelay) {
	tb.Helper()
	f := &fakeRelay{t: tb, rooms: make(map[string]*fakeRoom)}
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", f.handlePing)
	mux.HandleFunc(wire.PathRelayAllocate, f.handleAllocate)
	mux.HandleFunc(wire.PathRelayRoomClose, f.handleRoomClose)
	f.info = wire.RelayInfo{BootID: "bench-boot", Endpoint: "http://relay.mem:8081", Host: "relay.mem", Region: "eu", Port: 6942, UDPPort: 7777, UDPPortV2: 7778}
	opts := Options{
		Secret:     testSecret,
		Logger:     slog.New(slog.DiscardHandler),
		HTTPClient: &http.Client{Transport: memTransport{mux}},
		// Every request comes from httptest's one address: the per-source
		// limits would measure 429s after the first burst.
		AllocateRate:      limit.Rate{Every: -1},
		JoinRate:          limit.Rate{Every: -1},
		MaxRoomsPerSource: -1,
	}
	if mod != nil {
		mod(&opts)
	}
	s := newChecked(tb, opts)
	body, _ := json.Marshal(wire.RegisterRequest{Relay: f.info})
	req := httptest.NewRequest(http.MethodPost, wire.PathRegister, bytes.NewReader(body))
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	return s, f
}

func TestInMemorySetup(t *testing.T) {
	s, _ := newMemSetup(t)
	allocateAndJoin(t, s.Handler(), "room")
}

// allocateWS allocates name in region eu (allocation id "id-"+name)
// through h and returns the recorded answer.
func allocateWS(h http.Handler, name string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/allocate_ws", nil)
	req.Header.Set(wire.HeaderName, name)
	req.Header.Set(wire.HeaderRegion, "eu")
	req.Header.Set(wire.HeaderAllocationID, "id-"+name)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func allocateAndJoin(tb testing.TB, h http.Handler, name string) {
	tb.Helper()
	rec := allocateWS(h, name)
	if rec.Code != http.StatusOK {
		tb.Fatalf("allocate: %d %s", rec.Code, rec.Body)
	}
	req := httptest.NewRequest(http.MethodGet, "/join", nil)
	req.Header.Set(wire.HeaderName, name)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("join: %d %s", rec.Code, rec.Body)
	}
}

// BenchmarkAllocateJoin is one POST /allocate_ws (placement, relay call,
// validation, commit) plus one GET /join through Handler(), the relay being
// reached through an in-memory RoundTripper.
func BenchmarkAllocateJoin(b *testing.B) {
	s, _ := newMemSetup(b)
	h := s.Handler()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		allocateAndJoin(b, h, "room-"+strconv.Itoa(i))
		i++
	}
}

// BenchmarkJoin is a GET /join of a live room through Handler().
func BenchmarkJoin(b *testing.B) {
	s, _ := newMemSetup(b)
	h := s.Handler()
	allocateAndJoin(b, h, "room")
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "/join", nil)
		req.Header.Set(wire.HeaderName, "room")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkAllocateJoinLoopback is the same pair over real loopback HTTP:
// a started balancer, a fake relay on its own server, keep-alive clients.
// Its time and allocations are those of all three sides in one process.
func BenchmarkAllocateJoinLoopback(b *testing.B) {
	h := newHarness(b, nil)
	r := newFakeRelay(b, "eu")
	r.register(h)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		name := "room-" + strconv.Itoa(i)
		if _, err := h.allocate(name, "eu", "id-"+name); err != nil {
			b.Fatal(err)
		}
		if _, err := h.join(name); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// placementRegistry is 32 registered relays, half in eu, with labels and
// capacity, none full.
func placementRegistry(tb testing.TB) *registry {
	g := newRegistry()
	for i := range 32 {
		region, tier := "eu", "pro"
		if i%2 == 1 {
			region, tier = "us", "free"
		}
		g.install(wire.RegisterRequest{Relay: wire.RelayInfo{
			BootID: "b" + strconv.Itoa(i), Endpoint: "http://r" + strconv.Itoa(i), Region: region,
			Labels: map[string]string{"tier": tier}, Capacity: wire.Capacity{MaxRooms: 100, MaxConnections: 1000},
		}}, time.Time{})
	}
	return g
}

// BenchmarkCandidates is the placement of one allocation over 32 relays,
// per strategy, with and without a required label.
func BenchmarkCandidates(b *testing.B) {
	g := placementRegistry(b)
	for _, tc := range []struct {
		name string
		p    Placement
		st   Strategy
	}{
		{"least", Placement{Region: "eu"}, StrategyLeast},
		{"most", Placement{Region: "eu"}, StrategyMost},
		{"random", Placement{Region: "eu"}, StrategyRandom},
		{"least-labels", Placement{Region: "eu", Labels: map[string]string{"tier": "pro"}}, StrategyLeast},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c, _ := g.candidates(tc.p, tc.st, rand.IntN, time.Time{}, DefaultRelayExpiry); len(c) == 0 {
					b.Fatal("no candidate")
				}
			}
		})
	}
}

// TestCandidatesAllocateOnce: placement allocates its candidate slice and
// nothing else, whatever the strategy or labels (the reasons for leaving
// relays out are counted, and formatted only when nothing fits).
func TestCandidatesAllocateOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	g := placementRegistry(t)
	for _, st := range []Strategy{StrategyLeast, StrategyMost, StrategyRandom} {
		p := Placement{Region: "eu", Labels: map[string]string{"tier": "pro"}}
		if n := testing.AllocsPerRun(100, func() { g.candidates(p, st, rand.IntN, time.Time{}, DefaultRelayExpiry) }); n != 1 {
			t.Errorf("%s: %v allocations, want 1", st, n)
		}
	}
}

// BenchmarkEventSync is one diff of the event hub while a stream is open
// (what every allocation's poke costs then): the fleet's view taken and
// compared with the last, at 1,000 and 10,000 rooms, nothing changed.
func BenchmarkEventSync(b *testing.B) {
	for _, rooms := range []int{1000, 10000} {
		b.Run(strconv.Itoa(rooms), func(b *testing.B) {
			s, _ := newMemSetup(b)
			h := s.Handler()
			for i := range rooms {
				allocateAndJoin(b, h, "room-"+strconv.Itoa(i))
			}
			sub, err := s.events.subscribe()
			if err != nil {
				b.Fatal(err)
			}
			defer s.events.unsubscribe(sub)
			b.ReportAllocs()
			for b.Loop() {
				s.events.sync()
			}
		})
	}
}
