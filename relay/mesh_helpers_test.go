package relay

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// meshBalancer is the part of a balancer the machines of a multi-machine
// app talk to: it accepts every registration and removal, applies
// publications as the balancer's compare-and-set does for one incarnation
// per name (a moved one only over the incarnation it names), and answers
// room locations from what the test placed and what moved.
type meshBalancer struct {
	srv *httptest.Server

	mu      sync.Mutex
	rooms   map[string]wire.RoomLocation // guarded by mu
	lookups int                          // guarded by mu
	relays  map[string]wire.RelayInfo    // guarded by mu: registered boots
	moves   []wire.Publication           // guarded by mu: applied publications with MovedFrom
	live    map[string]liveRoom          // guarded by mu: the incarnation holding each name, once known

	noHandover    atomic.Bool  // answer as a balancer that predates handovers
	conflictMoves atomic.Bool  // refuse moved publications as conflicts
	failMoves     atomic.Int32 // answer that many publish requests carrying a moved room with a 503
	failLookups   atomic.Int32 // answer that many room lookups with a 502, as a proxy with no balancer behind it
}

type liveRoom struct {
	wire.Incarnation
	revision uint64
}

// apply is the compare-and-set of one publication of boot, as the
// balancer's: the same incarnation updates (applied) or repeats
// (current); another one conflicts, unless it moved from exactly this one.
func (b *meshBalancer) apply(boot string, p wire.Publication) wire.PublicationStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	this := wire.Incarnation{BootID: boot, Epoch: p.Epoch}
	cur, known := b.live[p.Name]
	switch {
	case known && cur.Incarnation == this && p.Revision <= cur.revision:
		return wire.PubCurrent
	case known && cur.Incarnation == this:
	case p.MovedFrom != nil && (b.conflictMoves.Load() || known && cur.Incarnation != *p.MovedFrom):
		return wire.PubConflict
	case p.MovedFrom != nil:
		// A handover: the room now lives with the publisher.
		b.moves = append(b.moves, p)
		if info, ok := b.relays[boot]; ok {
			b.rooms[p.Name] = wire.RoomLocation{Name: p.Name, BootID: info.BootID, MachineID: info.MachineID,
				Endpoint: info.Endpoint, Host: info.Host, Port: info.Port, Region: info.Region}
		}
	case known:
		return wire.PubConflict
	}
	b.live[p.Name] = liveRoom{Incarnation: this, revision: p.Revision}
	return wire.PubApplied
}

func newMeshBalancer(t testing.TB) *meshBalancer {
	b := &meshBalancer{rooms: map[string]wire.RoomLocation{}, relays: map[string]wire.RelayInfo{}, live: map[string]liveRoom{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.PathRegister, func(w http.ResponseWriter, r *http.Request) {
		var req wire.RegisterRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		b.mu.Lock()
		b.relays[req.Relay.BootID] = req.Relay
		b.mu.Unlock()
		wire.WriteJSON(w, http.StatusOK, wire.RegisterResponse{BalancerBoot: "mesh-balancer", Handover: !b.noHandover.Load()})
	})
	mux.HandleFunc("POST "+wire.PathPublish, func(w http.ResponseWriter, r *http.Request) {
		var req wire.PublishRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		for _, p := range req.Rooms {
			if p.MovedFrom != nil && b.takeFailure() {
				wire.WriteError(w, wire.ErrInternal)
				return
			}
		}
		resp := wire.PublishResponse{Results: []wire.PublicationResult{}}
		for _, p := range req.Rooms {
			resp.Results = append(resp.Results, wire.PublicationResult{Name: p.Name, Epoch: p.Epoch, Status: b.apply(req.BootID, p)})
		}
		wire.WriteJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("POST "+wire.PathUnregister, func(w http.ResponseWriter, r *http.Request) {
		var req wire.UnregisterRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		resp := wire.UnregisterResponse{Results: []wire.RemovalResult{}}
		for _, rem := range req.Rooms {
			b.mu.Lock()
			if b.live[rem.Name].Incarnation == (wire.Incarnation{BootID: req.BootID, Epoch: rem.Epoch}) {
				delete(b.live, rem.Name)
			}
			b.mu.Unlock()
			resp.Results = append(resp.Results, wire.RemovalResult{Name: rem.Name, Epoch: rem.Epoch, Status: wire.RemApplied})
		}
		wire.WriteJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("GET "+wire.PathRoomLocation, func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.lookups++
		if b.failLookups.Add(-1) >= 0 {
			b.mu.Unlock()
			http.Error(w, "no machine to route to", http.StatusBadGateway)
			return
		}
		loc, ok := b.rooms[r.URL.Query().Get("name")]
		b.mu.Unlock()
		if !ok {
			wire.WriteError(w, wire.ErrRoomNotFound)
			return
		}
		wire.WriteJSON(w, http.StatusOK, loc)
	})
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(wire.HeaderInternalSecret) != testSecret {
			wire.WriteError(w, wire.ErrUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// takeFailure consumes one of failMoves, if any is left.
func (b *meshBalancer) takeFailure() bool {
	for {
		n := b.failMoves.Load()
		if n <= 0 {
			return false
		}
		if b.failMoves.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// place records s as the holder of room, with the incarnation s holds, as
// the balancer does when it commits an allocation.
func (b *meshBalancer) place(room string, s *Server) {
	var inc liveRoom
	if r := s.core.Room(room); r != nil {
		inc = liveRoom{Incarnation: wire.Incarnation{BootID: s.BootID(), Epoch: r.Epoch()}, revision: r.Revision()}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rooms[room] = wire.RoomLocation{Name: room, BootID: s.BootID(), MachineID: s.opts.MachineID,
		Endpoint: s.opts.Endpoint, Host: s.opts.PublicHost, Port: s.advertisedWSPort, Region: s.opts.Region}
	if inc.Epoch != "" {
		b.live[room] = inc
	}
}

// setConnections sets the count the balancer reports for room.
func (b *meshBalancer) setConnections(room string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	loc := b.rooms[room]
	loc.Connections = n
	b.rooms[room] = loc
}

// movedPublications returns the publications that named a handover.
func (b *meshBalancer) movedPublications() []wire.Publication {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]wire.Publication(nil), b.moves...)
}

func (b *meshBalancer) lookupCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lookups
}

// startMachine starts one machine of a multi-machine app: every machine
// advertises the app's public host app.test:443, as the machines of one
// Fly app do.
func startMachine(t testing.TB, b *meshBalancer, id string) *Server {
	t.Helper()
	s := startRelay(t, Options{
		BalancerURL:  b.srv.URL,
		MultiMachine: true,
		MachineID:    id,
		PublicHost:   "app.test",
		PublicWSPort: 443,
		Region:       "ams",
	})
	// Registered: the balancer's answer (handover support) is known.
	waitFor(t, "the machine's first heartbeat", func() bool { return s.reg.beats.Load() > 0 })
	return s
}

// allocateOn creates room on s as the balancer does, naming s's boot.
func allocateOn(t testing.TB, s *Server, room string) (hostSecret, clientSecret string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL()+wire.PathRelayAllocate+"?s="+wire.SessionID(room).Hint(), nil)
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	req.Header.Set(wire.HeaderName, room)
	req.Header.Set(wire.HeaderAllocationID, "alloc-"+room)
	req.Header.Set(wire.HeaderTargetBoot, s.BootID())
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("allocate %s: %d %s", room, resp.StatusCode, body)
	}
	var a wire.RelayAllocation
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	return a.Capability.Secret, a.Publication.ClientSecret
}
