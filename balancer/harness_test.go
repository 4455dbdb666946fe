package balancer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testSecret = "test-secret"

// harness is a started balancer on 127.0.0.1:0 driven by a fake clock (its
// loops tick only when a test advances it).
type harness struct {
	t      testing.TB
	s      *Server
	clk    *clock.Fake
	client *http.Client
}

func newHarness(t testing.TB, mod func(*Options)) *harness {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{
		Secret:       testSecret,
		ListenHost:   "127.0.0.1",
		Region:       "test",
		Version:      "v-test",
		RelayTimeout: 2 * time.Second,
		// Off unless a test sets them: most tests allocate in bursts.
		AllocateRate:      limit.Rate{Every: -1},
		JoinRate:          limit.Rate{Every: -1},
		MaxRoomsPerSource: -1,
		Clock:             clk,
		Logger:            slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&opts)
	}
	s := newChecked(t, opts)
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr := &http.Transport{}
	h := &harness{t: t, s: s, clk: clk, client: &http.Client{Timeout: 10 * time.Second, Transport: tr}}
	t.Cleanup(func() {
		// Idle keep-alive connections first: http.Server.Shutdown waits up
		// to 5 s for a connection that never sent a request.
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return h
}

// newChecked is New for a test: the balancer's ConsistencyCheck runs when
// the test ends, after every cleanup the test registers later (those run
// first: a Shutdown, a Close) and after its deferred calls.
func newChecked(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.ConsistencyCheck(); err != nil {
			t.Errorf("balancer state inconsistent after the test: %v", err)
		}
	})
	return s
}

// do sends a request to the balancer and returns status, body and headers.
func (h *harness) do(method, path string, hdr map[string]string, body []byte) (int, []byte, http.Header) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.s.URL()+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return send(h.t, h.client, req)
}

// send sends req on c and returns its answer, read whole; a request that
// fails fails the test.
func send(t testing.TB, c *http.Client, req *http.Request) (int, []byte, http.Header) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

// decodeAnswer decodes a 200 body into out, or the error body.
func decodeAnswer(t testing.TB, status int, body []byte, out any) *wire.Error {
	t.Helper()
	if status != http.StatusOK {
		return wire.DecodeError(status, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
	}
	return nil
}

func (h *harness) allocate(name, region, allocationID string) (wire.Capability, *wire.Error) {
	h.t.Helper()
	var c wire.Capability
	st, b, _ := h.do(http.MethodPost, "/allocate_ws", map[string]string{"name": name, "region": region, "allocation_id": allocationID}, nil)
	return c, decodeAnswer(h.t, st, b, &c)
}

func (h *harness) join(name string) (wire.Capability, *wire.Error) {
	h.t.Helper()
	var c wire.Capability
	st, b, _ := h.do(http.MethodGet, "/join", map[string]string{"name": name}, nil)
	return c, decodeAnswer(h.t, st, b, &c)
}

func (h *harness) list(page int) wire.ListResponse {
	h.t.Helper()
	var l wire.ListResponse
	st, b, _ := h.do(http.MethodGet, "/list?page="+strconv.Itoa(page), nil, nil)
	if err := decodeAnswer(h.t, st, b, &l); err != nil {
		h.t.Fatalf("list: %v", err)
	}
	return l
}

func (h *harness) servers() []wire.ServerInfo {
	h.t.Helper()
	var s wire.ServersResponse
	st, b, _ := h.do(http.MethodGet, "/servers", nil, nil)
	if err := decodeAnswer(h.t, st, b, &s); err != nil {
		h.t.Fatalf("servers: %v", err)
	}
	return s.Servers
}

// wantCode fails unless err carries code.
func wantCode(t testing.TB, err *wire.Error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want error %s", code)
	}
	if err.Code != code {
		t.Fatalf("got error %s (%s, status %d), want %s", err.Code, err.Message, err.Status, code)
	}
}

func noErr(t testing.TB, err *wire.Error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error %s: %s (status %d)", err.Code, err.Message, err.Status)
	}
}

// waitFor waits up to 5 s for cond (testutil.Eventually with this
// package's usual bound).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, what, cond)
}

// fakeRoom is one room on a fake relay.
type fakeRoom struct {
	allocationID, epoch, hostSecret, clientSecret string
	revision                                      uint64
	connections                                   int
}

// Allocation modes of a fake relay.
const (
	allocNormal    = ""
	allocLoseOnce  = "lose-once"  // create the room, then drop the connection mid-answer
	allocMalformed = "malformed"  // answer a capability with no usable port
	allocGarbage   = "garbage"    // answer 200 with a body that is not JSON
	allocDraining  = "draining"   // answer wire.ErrDraining
	allocStaleBoot = "stale-boot" // answer wire.ErrStaleBoot (another boot runs there now)
	allocNewEpoch  = "new-epoch"  // answer a replay with a fresh epoch
	allocStallOnce = "stall-once" // create the room, then answer nothing until the caller gives up
	allocFull      = "full"       // answer wire.ErrRelayFull
	allocRetiring  = "retiring"   // answer wire.ErrRetiring
)

// fakeRelay is a relay as the balancer sees it: /ping and the allocation
// route on a loopback httptest server, and helpers that send the internal
// requests.
type fakeRelay struct {
	t      testing.TB
	srv    *httptest.Server
	client *http.Client

	mu        sync.Mutex
	info      wire.RelayInfo // info.BootID is what /ping reports unless pingBoot is set
	pingBoot  string
	pingFail  bool
	pingHook  func()        // called inside /ping, outside mu (may block)
	hold      chan struct{} // when set, allocations wait for it to close before answering
	allocMode string
	rooms     map[string]*fakeRoom
	seq       int
	lastHint  string
	lastHdr   http.Header       // headers of the last allocation call
	targets   map[string]string // room name -> HeaderTargetBoot of its last allocation call
	// migrate answers the internal migration routes (nil: 404).
	migrate func(w http.ResponseWriter, r *http.Request)

	allocCalls atomic.Int32
	closeCalls int          // guarded by mu: room close calls (v1_helpers_test.go)
	conns      atomic.Int32 // TCP connections accepted
}

func newFakeRelay(t testing.TB, region string) *fakeRelay {
	t.Helper()
	f := &fakeRelay{t: t, rooms: make(map[string]*fakeRoom)}
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", f.handlePing)
	mux.HandleFunc(wire.PathRelayAllocate, f.handleAllocate)
	mux.HandleFunc(wire.PathRelayRoomClose, f.handleRoomClose) // v1_helpers_test.go
	for _, op := range []wire.MigrationOp{wire.OpCurrent, wire.OpAuthorize, wire.OpClaim, wire.OpActivate} {
		mux.HandleFunc(op.RelayPath(), func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			h := f.migrate
			f.mu.Unlock()
			if h == nil {
				wire.WriteError(w, wire.ErrNotFound)
				return
			}
			h(w, r)
		})
	}
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.Start()
	tr := &http.Transport{}
	f.client = &http.Client{Timeout: 10 * time.Second, Transport: tr}
	f.info = wire.RelayInfo{
		BootID:    "boot-" + region + "-" + testutil.RandomHex(6),
		Endpoint:  f.srv.URL,
		Host:      region + ".relay.test",
		Region:    region,
		Port:      6942,
		UDPPort:   7777,
		UDPPortV2: 7778,
		MachineID: "machine-" + region + "-" + testutil.RandomHex(4),
	}
	t.Cleanup(func() {
		f.srv.Close()
		tr.CloseIdleConnections()
	})
	return f
}

func (f *fakeRelay) boot() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info.BootID
}

// restart gives the relay a new boot (same endpoint and metadata), dropping
// its rooms, as a restarted process would.
func (f *fakeRelay) restart() wire.RelayInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info.BootID += "-r"
	f.rooms = make(map[string]*fakeRoom)
	return f.info
}

func (f *fakeRelay) set(fn func(f *fakeRelay)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeRelay) handlePing(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	hook, fail := f.pingHook, f.pingFail
	boot := f.info.BootID
	if f.pingBoot != "" {
		boot = f.pingBoot
	}
	region := f.info.Region
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	fail = fail || f.pingFail
	f.mu.Unlock()
	if fail {
		wire.WriteError(w, wire.ErrInternal)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.Ping{Role: "relay", BootID: boot, Region: region, InternalProtocol: wire.InternalProtocolVersion})
}

func (f *fakeRelay) handleAllocate(w http.ResponseWriter, r *http.Request) {
	f.allocCalls.Add(1)
	if r.Method != http.MethodPost {
		wire.WriteError(w, wire.ErrMethodNotAllowed)
		return
	}
	if err := wire.CheckInternal(r, testSecret); err != nil {
		wire.WriteError(w, err)
		return
	}
	name, allocID := r.Header.Get(wire.HeaderName), r.Header.Get(wire.HeaderAllocationID)
	if name == "" || allocID == "" {
		wire.WriteError(w, wire.ErrMissingHeader)
		return
	}
	f.mu.Lock()
	f.lastHint = r.URL.Query().Get(wire.SessionQueryParam)
	f.lastHdr = r.Header.Clone()
	if f.targets == nil {
		f.targets = make(map[string]string)
	}
	f.targets[name] = r.Header.Get(wire.HeaderTargetBoot)
	mode := f.allocMode
	if mode == allocLoseOnce || mode == allocStallOnce {
		f.allocMode = allocNormal
	}
	if mode == allocDraining || mode == allocStaleBoot || mode == allocFull || mode == allocRetiring {
		f.mu.Unlock()
		switch mode {
		case allocRetiring:
			wire.WriteError(w, wire.ErrRetiring)
		case allocStaleBoot:
			wire.WriteError(w, wire.ErrStaleBoot)
		case allocFull:
			wire.WriteError(w, wire.ErrRelayFull)
		default:
			wire.WriteError(w, wire.ErrDraining)
		}
		return
	}
	room, replayed := f.rooms[name], true
	if room != nil && room.allocationID != allocID {
		f.mu.Unlock()
		wire.WriteError(w, wire.ErrRoomTaken)
		return
	}
	if room == nil || mode == allocNewEpoch {
		f.seq++
		replayed = false
		room = &fakeRoom{
			allocationID: allocID,
			epoch:        fmt.Sprintf("epoch-%d", f.seq),
			hostSecret:   fmt.Sprintf("host-secret-%d", f.seq),
			clientSecret: fmt.Sprintf("client-secret-%d", f.seq),
			revision:     1,
		}
		f.rooms[name] = room
	}
	out := wire.RelayAllocation{
		Capability: wire.Capability{
			Host: "internal-name-of-relay", Secret: room.hostSecret,
			Port: f.info.Port, UDPPort: f.info.UDPPort, UDPPortV2: f.info.UDPPortV2, SSL: f.info.SSL,
		},
		Publication: wire.Publication{
			Name: name, Epoch: room.epoch, Revision: room.revision,
			ClientSecret: room.clientSecret, AllocationID: allocID,
		},
		BootID:   f.info.BootID,
		Replayed: replayed,
	}
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	switch mode {
	case allocLoseOnce:
		// The answer starts, then the connection drops mid-body.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "4096")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"capability":`)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case allocStallOnce:
		<-r.Context().Done()
		return
	case allocMalformed:
		out.Capability.Host = "leaky-relay-detail.internal"
		out.Capability.Port = 0
	case allocGarbage:
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "<html>leaky-relay-detail</html>")
		return
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

// post sends an internal request and decodes the answer.
func (f *fakeRelay) post(b *harness, path string, in, out any) *wire.Error {
	f.t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		f.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, b.s.URL()+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	req.Header.Set(wire.HeaderInternalVersion, strconv.Itoa(wire.InternalProtocolVersion))
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	if v := resp.Header.Get(wire.HeaderInternalVersion); v != strconv.Itoa(wire.InternalProtocolVersion) {
		f.t.Errorf("answer of %s carries internal version %q", path, v)
	}
	return decodeAnswer(f.t, resp.StatusCode, rb, out)
}

// registerAs sends a heartbeat with the given info.
func (f *fakeRelay) registerAs(b *harness, info wire.RelayInfo) (wire.RegisterResponse, *wire.Error) {
	f.t.Helper()
	var resp wire.RegisterResponse
	err := f.post(b, wire.PathRegister, wire.RegisterRequest{Relay: info}, &resp)
	return resp, err
}

func (f *fakeRelay) register(b *harness) wire.RegisterResponse {
	f.t.Helper()
	f.mu.Lock()
	info := f.info
	f.mu.Unlock()
	resp, err := f.registerAs(b, info)
	noErr(f.t, err)
	return resp
}

func (f *fakeRelay) publishAs(b *harness, boot string, pubs ...wire.Publication) []wire.PublicationStatus {
	f.t.Helper()
	var resp wire.PublishResponse
	noErr(f.t, f.post(b, wire.PathPublish, wire.PublishRequest{BootID: boot, Endpoint: f.info.Endpoint, Rooms: pubs}, &resp))
	if len(resp.Results) != len(pubs) {
		f.t.Fatalf("got %d results for %d publications", len(resp.Results), len(pubs))
	}
	out := make([]wire.PublicationStatus, len(resp.Results))
	for i, r := range resp.Results {
		out[i] = r.Status
	}
	return out
}

func (f *fakeRelay) publish(b *harness, pubs ...wire.Publication) []wire.PublicationStatus {
	f.t.Helper()
	return f.publishAs(b, f.boot(), pubs...)
}

func (f *fakeRelay) unregisterAs(b *harness, boot string, rms ...wire.Removal) []wire.RemovalStatus {
	f.t.Helper()
	var resp wire.UnregisterResponse
	noErr(f.t, f.post(b, wire.PathUnregister, wire.UnregisterRequest{BootID: boot, Endpoint: f.info.Endpoint, Rooms: rms}, &resp))
	out := make([]wire.RemovalStatus, len(resp.Results))
	for i, r := range resp.Results {
		out[i] = r.Status
	}
	return out
}

func (f *fakeRelay) unregister(b *harness, rms ...wire.Removal) []wire.RemovalStatus {
	f.t.Helper()
	return f.unregisterAs(b, f.boot(), rms...)
}

func (f *fakeRelay) roomCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.rooms)
}

func pub(name, epoch string, rev uint64, conns int) wire.Publication {
	return wire.Publication{Name: name, Epoch: epoch, Revision: rev, Connections: conns, ClientSecret: "cs-" + name + "-" + epoch}
}

func wantStatuses[T comparable](t testing.TB, got []T, want ...T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
