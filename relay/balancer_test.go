package relay

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// fakeBalancer records the internal protocol and answers it with
// scriptable outcomes. It checks the secret and version header on every
// request.
type fakeBalancer struct {
	t   *testing.T
	srv *httptest.Server

	mu          sync.Mutex
	boot        string
	registered  bool // a restart forgets the relay until its next heartbeat
	registers   []wire.RegisterRequest
	publishes   []wire.PublishRequest
	unregisters []wire.UnregisterRequest
	// unregOutcomes are consumed one per unregister request: 0 means
	// answer 503, otherwise answer every entry with that status. When
	// empty, entries are applied.
	unregOutcomes []wire.RemovalStatus
	badRequests   int
	// refuseRegisters is how many registrations to refuse (409
	// boot_not_proven, as when the balancer cannot reach the endpoint yet).
	refuseRegisters int
	// pingProofs records, per register, whether GET {endpoint}/ping
	// answered the registering boot id (the listener was up first).
	pingProofs []bool
	// pubStatus answers the publications of these room names with this
	// status instead of applying them.
	pubStatus map[string]wire.PublicationStatus
	// bootWatch answers wire.PathBalancerBoot (nil: 404, a balancer
	// without the route).
	bootWatch http.HandlerFunc
	// refuseAll answers every request 401 (the balancer's SECRET changed).
	refuseAll bool
}

func newFakeBalancer(t *testing.T) *fakeBalancer {
	f := &fakeBalancer{t: t, boot: "balancer-1"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.PathRegister, f.register)
	mux.HandleFunc("POST "+wire.PathPublish, f.publish)
	mux.HandleFunc("POST "+wire.PathUnregister, f.unregister)
	mux.HandleFunc("GET "+wire.PathBalancerBoot, func(w http.ResponseWriter, r *http.Request) {
		if f.bootWatch == nil {
			http.NotFound(w, r)
			return
		}
		f.bootWatch(w, r)
	})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		refuse := f.refuseAll
		f.mu.Unlock()
		if refuse || r.Header.Get(wire.HeaderInternalSecret) != testSecret ||
			r.Header.Get(wire.HeaderInternalVersion) != strconv.Itoa(wire.InternalProtocolVersion) {
			f.mu.Lock()
			f.badRequests++
			f.mu.Unlock()
			wire.WriteError(w, wire.ErrUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeBalancer) decode(r *http.Request, v any) {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		f.t.Errorf("fake balancer: bad body on %s: %v", r.URL.Path, err)
	}
}

func (f *fakeBalancer) register(w http.ResponseWriter, r *http.Request) {
	var req wire.RegisterRequest
	f.decode(r, &req)
	proof := false
	if resp, err := http.Get(req.Relay.Endpoint + "/ping"); err == nil {
		var p wire.Ping
		proof = json.NewDecoder(resp.Body).Decode(&p) == nil && p.BootID == req.Relay.BootID
		resp.Body.Close()
	}
	f.mu.Lock()
	f.pingProofs = append(f.pingProofs, proof)
	f.registers = append(f.registers, req)
	if f.refuseRegisters > 0 {
		f.refuseRegisters--
		f.mu.Unlock()
		wire.WriteError(w, wire.ErrBootNotProven)
		return
	}
	isNew := !f.registered
	f.registered = true
	resp := wire.RegisterResponse{BalancerBoot: f.boot, New: isNew, Republish: isNew, LivenessVersion: uint64(len(f.registers))}
	f.mu.Unlock()
	wire.WriteJSON(w, http.StatusOK, resp)
}

func (f *fakeBalancer) publish(w http.ResponseWriter, r *http.Request) {
	var req wire.PublishRequest
	f.decode(r, &req)
	f.mu.Lock()
	f.publishes = append(f.publishes, req)
	status := wire.PubApplied
	if !f.registered {
		status = wire.PubRejected
	}
	f.mu.Unlock()
	resp := wire.PublishResponse{Results: []wire.PublicationResult{}}
	for _, p := range req.Rooms {
		st := status
		f.mu.Lock()
		if s, ok := f.pubStatus[p.Name]; ok {
			st = s
		}
		f.mu.Unlock()
		resp.Results = append(resp.Results, wire.PublicationResult{Name: p.Name, Epoch: p.Epoch, Status: st})
	}
	wire.WriteJSON(w, http.StatusOK, resp)
}

func (f *fakeBalancer) unregister(w http.ResponseWriter, r *http.Request) {
	var req wire.UnregisterRequest
	f.decode(r, &req)
	f.mu.Lock()
	f.unregisters = append(f.unregisters, req)
	status := wire.RemApplied
	if len(f.unregOutcomes) > 0 {
		status = f.unregOutcomes[0]
		f.unregOutcomes = f.unregOutcomes[1:]
	}
	f.mu.Unlock()
	if status == "" {
		wire.WriteError(w, wire.ErrNoRelays)
		return
	}
	resp := wire.UnregisterResponse{Results: []wire.RemovalResult{}}
	for _, rem := range req.Rooms {
		resp.Results = append(resp.Results, wire.RemovalResult{Name: rem.Name, Epoch: rem.Epoch, Status: status})
	}
	wire.WriteJSON(w, http.StatusOK, resp)
}

// restart simulates a balancer restart: a new boot that knows no relay.
func (f *fakeBalancer) restart(boot string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.boot = boot
	f.registered = false
}

type fakeCounts struct{ registers, publishes, unregisters int }

func (f *fakeBalancer) counts() fakeCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeCounts{len(f.registers), len(f.publishes), len(f.unregisters)}
}

func (f *fakeBalancer) lastPublish() wire.PublishRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.publishes[len(f.publishes)-1]
}

func (f *fakeBalancer) lastRegister() wire.RegisterRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.registers[len(f.registers)-1]
}

func (f *fakeBalancer) lastUnregister() wire.UnregisterRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unregisters[len(f.unregisters)-1]
}
