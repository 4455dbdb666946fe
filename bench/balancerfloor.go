package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// The balancer mode's floor (KindBalancerFloor): the least an HTTP server
// written with net/http can spend answering the balancer's load. It
// answers the same requests with the same bodies as the balancer and
// makes the same one call to the same relay child for every allocation,
// and nothing else: no registry, placement, leases, rate limits, metrics,
// middleware or logging. Its http.Server has the bounds every purrfly
// server has (wire.HTTPLimits: header, read, write and idle timeouts, the
// header size cap), which cost net/http a few deadline changes per request
// that no server exposed to the Internet may save. Its CPU per pair is what net/http, the JSON of
// the bodies and the relay call cost on this machine, the floor the
// balancer's own is measured against (Result.RatioCPUPerPair).
//
//   - POST /allocate_ws (headers name, region, allocation_id): POST
//     wire.PathRelayAllocate to the relay with the balancer's headers
//     (secret, protocol version, name, region, allocation_id,
//     Idempotency-Key, the relay's boot as HeaderTargetBoot, ?s= hint),
//     so the relay creates and holds the room exactly as for the
//     balancer; remember the room's client capability and answer the
//     host capability the relay gave.
//   - GET or POST /join (header name): the remembered client capability,
//     or room_not_found.

// internalVersion is the internal protocol version header's value.
var internalVersion = strconv.Itoa(wire.InternalProtocolVersion)

// floorRelayTimeout bounds the floor's call to the relay, as the
// balancer's RelayTimeout does its own.
const floorRelayTimeout = 5 * time.Second

// balancerFloor is the floor server. Static after construction but for
// rooms.
type balancerFloor struct {
	relay  string // the relay child's HTTP base URL
	boot   string // the relay's boot id (its /ping), sent as HeaderTargetBoot
	secret string
	client *http.Client

	// rooms maps a room name to its client capability; guarded by mu. A
	// plain map of values, not a sync.Map: a run leaves some 100,000 rooms
	// in it, and sync.Map's node and boxed value per entry cost the
	// floor's garbage collector more than the balancer's whole room table
	// (measured: 16% of the floor's CPU in marking against the
	// balancer's 10%).
	mu    sync.RWMutex
	rooms map[string]wire.Capability
}

func serveBalancerFloor(ctx context.Context, cfg ServerConfig, stdout io.Writer, log *slog.Logger) error {
	if cfg.RelayURL == "" {
		return errors.New("a balancer floor child needs the relay's URL")
	}
	// The same transport as the balancer's default client: keep-alive
	// connections for every allocation in flight, no gzip.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost, t.DisableCompression = 4096, 256, true
	t.ResponseHeaderTimeout = floorRelayTimeout
	f := &balancerFloor{relay: cfg.RelayURL, secret: cfg.Secret, client: &http.Client{Timeout: floorRelayTimeout, Transport: t},
		rooms: make(map[string]wire.Capability)}
	defer f.client.CloseIdleConnections()
	boot, err := f.relayBoot(ctx)
	if err != nil {
		return err
	}
	f.boot = boot
	mux := http.NewServeMux()
	mux.HandleFunc("POST /allocate_ws", f.allocate)
	mux.HandleFunc("GET /join", f.join)
	mux.HandleFunc("POST /join", f.join)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("failed to listen: %w", err)
	}
	// The same bounds as every purrfly server (timeouts, header size):
	// net/http's own work per request, which the balancer cannot drop.
	srv := &http.Server{Handler: mux}
	wire.HTTPLimits{}.Apply(srv)
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := printReady(stdout, "http://"+ln.Addr().String()); err != nil {
		_ = ln.Close()
		return err
	}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("floor server stopped", "err", err)
		return err
	}
	return nil
}

// relayBoot reads the relay's boot id from its /ping, once.
func (f *balancerFloor) relayBoot(ctx context.Context) (string, error) {
	var p wire.Ping
	if err := (wire.Call{Method: http.MethodGet, URL: f.relay + "/ping", OK: http.StatusOK}).DoJSON(ctx, f.client, &p); err != nil {
		return "", fmt.Errorf("failed to ping the relay: %w", err)
	}
	if p.BootID == "" {
		return "", errors.New("failed to read the relay's boot id")
	}
	return p.BootID, nil
}

func (f *balancerFloor) allocate(w http.ResponseWriter, r *http.Request) {
	name, region, id := r.Header.Get(wire.HeaderName), r.Header.Get(wire.HeaderRegion), r.Header.Get(wire.HeaderAllocationID)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), floorRelayTimeout)
	defer cancel()
	u := f.relay + wire.PathRelayAllocate + "?" + wire.SessionQueryParam + "=" + url.QueryEscape(wire.SessionID(name).Hint())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		wire.WriteError(w, wire.ErrBadRequest)
		return
	}
	// Plain Header.Set, as a minimal server would: wire's own header
	// helpers are the balancer's side of the comparison.
	h := req.Header
	h.Set(wire.HeaderInternalSecret, f.secret)
	h.Set(wire.HeaderInternalVersion, internalVersion)
	h.Set(wire.HeaderName, name)
	h.Set(wire.HeaderRegion, region)
	h.Set(wire.HeaderAllocationID, id)
	h.Set("Idempotency-Key", id)
	h.Set(wire.HeaderTargetBoot, f.boot)
	resp, err := f.client.Do(req)
	if err != nil {
		wire.WriteError(w, wire.ErrRelayFailed)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxBodySize))
	if err != nil {
		wire.WriteError(w, wire.ErrRelayFailed)
		return
	}
	if resp.StatusCode != http.StatusOK {
		wire.WriteError(w, wire.DecodeError(resp.StatusCode, body)) // the relay's own error
		return
	}
	var out wire.RelayAllocation
	if err := json.Unmarshal(body, &out); err != nil {
		wire.WriteError(w, wire.ErrRelayBadAnswer)
		return
	}
	join := out.Capability
	join.Secret = out.Publication.ClientSecret
	f.mu.Lock()
	f.rooms[name] = join
	f.mu.Unlock()
	writeJSON(w, out.Capability)
}

func (f *balancerFloor) join(w http.ResponseWriter, r *http.Request) {
	f.mu.RLock()
	c, ok := f.rooms[r.Header.Get(wire.HeaderName)]
	f.mu.RUnlock()
	if !ok {
		wire.WriteError(w, wire.ErrRoomNotFound)
		return
	}
	writeJSON(w, c)
}

// writeJSON answers 200 with v as net/http's plain idiom does (the floor
// keeps its own, so that changes to wire's encoding move only the
// balancer's side).
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
