package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// rawHTTPServer answers one canned response per connection and records the
// exact request bytes (request line and headers) it received.
type rawHTTPServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	reqs []string
}

func newRawHTTPServer(t *testing.T, body string) *rawHTTPServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawHTTPServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			var sb strings.Builder
			for {
				line, err := br.ReadString('\n')
				sb.WriteString(line)
				if err != nil || line == "\r\n" {
					break
				}
			}
			s.mu.Lock()
			s.reqs = append(s.reqs, sb.String())
			s.mu.Unlock()
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawHTTPServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *rawHTTPServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

const goodCap = `{"host":"relay.example","secret":"s3cret","port":6942,"udpPort":7777,"udpPortV2":7778,"ssl":true}`

// TestBalancerRequestBytes checks the exact request lines and header lines a
// PurrNet client puts on the wire: lower-case underscore header names,
// Cache-Control: no-cache, and an empty POST body.
func TestBalancerRequestBytes(t *testing.T) {
	s := newRawHTTPServer(t, goodCap)
	b := NewBalancer(s.url()) // no trailing slash: added as PurrNet does
	ctx := testCtx(t, 10*time.Second)
	id := NewAllocationID()
	c, err := b.Allocate(ctx, "eu-central", "my room", id)
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	want := wire.Capability{Host: "relay.example", Secret: "s3cret", Port: 6942, UDPPort: 7777, UDPPortV2: 7778, SSL: true}
	if c != want {
		t.Fatalf("capability = %+v, want %+v", c, want)
	}
	if _, err := b.Join(ctx, "my room"); err != nil {
		t.Fatalf("Join: %v", err)
	}
	if _, err := b.AllocateLegacy(ctx, "eu-central", "my room"); err != nil {
		t.Fatalf("AllocateLegacy: %v", err)
	}
	reqs := s.requests()
	if len(reqs) != 3 {
		t.Fatalf("got %d requests, want 3", len(reqs))
	}
	for i, tc := range []struct {
		line  string
		has   []string
		hasNo []string
	}{
		{"POST /allocate_ws HTTP/1.1\r\n",
			[]string{"\r\nregion: eu-central\r\n", "\r\nname: my room\r\n", "\r\nallocation_id: " + id + "\r\n", "\r\nCache-Control: no-cache\r\n", "\r\nContent-Length: 0\r\n"}, nil},
		{"GET /join HTTP/1.1\r\n",
			[]string{"\r\nname: my room\r\n", "\r\nCache-Control: no-cache\r\n"}, []string{"allocation_id", "region:"}},
		{"GET /allocate_ws HTTP/1.1\r\n",
			[]string{"\r\nregion: eu-central\r\n", "\r\nname: my room\r\n", "\r\nCache-Control: no-cache\r\n"}, []string{"allocation_id"}},
	} {
		if !strings.HasPrefix(reqs[i], tc.line) {
			t.Errorf("request %d starts %q, want %q", i, firstLine(reqs[i]), tc.line)
		}
		for _, h := range tc.has {
			if !strings.Contains(reqs[i], h) {
				t.Errorf("request %d lacks header line %q:\n%s", i, strings.TrimSpace(h), reqs[i])
			}
		}
		for _, h := range tc.hasNo {
			if strings.Contains(reqs[i], h) {
				t.Errorf("request %d must not carry %q:\n%s", i, h, reqs[i])
			}
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\r\n"); return l }

func TestNewAllocationID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$`)
	seen := map[string]bool{}
	for range 100 {
		id := NewAllocationID()
		if !re.MatchString(id) {
			t.Fatalf("allocation id %q is not a v4 GUID in 32 lower-case hex digits", id)
		}
		if seen[id] {
			t.Fatalf("allocation id %q repeated", id)
		}
		seen[id] = true
	}
}

// TestBalancerRoutes drives every read route through an httptest balancer.
func TestBalancerRoutes(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Clone(context.Background()))
		mu.Unlock()
		switch r.URL.Path {
		case "/servers":
			wire.WriteJSON(w, 200, wire.ServersResponse{Servers: []wire.ServerInfo{
				{APIEndpoint: "http://" + r.Host + "/", Host: "127.0.0.1", WebSocketsPort: 6942, UDPPortV2: 7778, Region: "eu"}}})
		case "/ping":
			wire.WriteJSON(w, 200, wire.Ping{Role: "relay", BootID: "boot-1", Region: "eu"})
		case "/plain/ping":
			w.Write([]byte("pong"))
		case "/list":
			wire.WriteJSON(w, 200, wire.ListResponse{Results: []wire.RoomSummary{{Name: "r" + r.URL.Query().Get("page"), Region: "eu", ConnectedPlayers: 3}}, Total: 51})
		case "/getTotalConnections":
			wire.WriteJSON(w, 200, wire.TotalConnections{TotalConnections: 42})
		default:
			wire.WriteError(w, wire.ErrNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	ctx := testCtx(t, 10*time.Second)
	b := NewBalancer(srv.URL+"/").WithHeader("fly-force-instance-id", "m1")

	servers, err := b.Servers(ctx)
	if err != nil || len(servers) != 1 || servers[0].Region != "eu" || servers[0].WebSocketsPort != 6942 {
		t.Fatalf("Servers = %+v, %v", servers, err)
	}
	p, rtt, err := b.Ping(ctx, servers[0].APIEndpoint) // trailing slash: no "//ping"
	if err != nil || p.BootID != "boot-1" || p.Role != "relay" || rtt <= 0 {
		t.Fatalf("Ping = %+v, %v, %v", p, rtt, err)
	}
	p, rtt, err = b.Ping(ctx, srv.URL+"/plain")
	if err != nil || p != (wire.Ping{}) || rtt <= 0 {
		t.Fatalf("Ping of a non-JSON /ping = %+v, %v, %v; want zero Ping, a timing, no error", p, rtt, err)
	}
	best, _, err := b.Fastest(ctx, servers)
	if err != nil || best.Region != "eu" {
		t.Fatalf("Fastest = %+v, %v", best, err)
	}
	l, err := b.List(ctx, 1)
	if err != nil || l.Total != 51 || len(l.Results) != 1 || l.Results[0].Name != "r1" || l.Results[0].ConnectedPlayers != 3 {
		t.Fatalf("List(1) = %+v, %v", l, err)
	}
	n, err := b.TotalConnections(ctx)
	if err != nil || n != 42 {
		t.Fatalf("TotalConnections = %d, %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range seen {
		if r.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s %s: Cache-Control %q, want no-cache", r.Method, r.URL, r.Header.Get("Cache-Control"))
		}
		if r.Header.Get("fly-force-instance-id") != "m1" {
			t.Errorf("%s %s: extra header missing", r.Method, r.URL)
		}
		if strings.Contains(r.URL.Path, "//") {
			t.Errorf("path %q has a double slash", r.URL.Path)
		}
	}
}

// TestBalancerErrors: error bodies decode into *wire.Error, bad capabilities
// are refused as PurrNet refuses them, answers and waits are bounded.
func TestBalancerErrors(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("name") {
		case "taken":
			wire.WriteError(w, wire.ErrRoomTaken)
		case "html":
			w.WriteHeader(500)
			w.Write([]byte("<html>stack trace</html>"))
		case "huge":
			w.Write([]byte(`{"host":"` + strings.Repeat("a", MaxResponseSize) + `"}`))
		case "slow":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "no-secret":
			w.Write([]byte(`{"host":"h","port":1,"udpPortV2":2}`))
		case "blank-secret":
			w.Write([]byte(`{"host":"h","secret":"  ","port":1,"udpPortV2":2}`))
		case "no-port":
			w.Write([]byte(`{"host":"h","secret":"s","udpPortV2":2}`))
		case "no-udp":
			w.Write([]byte(`{"host":"h","secret":"s","port":1}`))
		case "big-port":
			w.Write([]byte(`{"host":"h","secret":"s","port":65536,"udpPortV2":2}`))
		case "bad-host":
			w.Write([]byte(`{"host":"h/evil?x","secret":"s","port":1,"udpPortV2":2}`))
		case "not-json":
			w.Write([]byte(`nope`))
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	ctx := testCtx(t, 20*time.Second)
	b := &Balancer{BaseURL: srv.URL, Timeout: 200 * time.Millisecond}

	_, err := b.Allocate(ctx, "eu", "taken", NewAllocationID())
	var we *wire.Error
	if !errors.Is(err, wire.ErrRoomTaken) || !errors.As(err, &we) || we.Status != 409 || we.Retryable || !IsPermanent(err) {
		t.Fatalf("taken: err = %v (%+v), want room_name_taken 409 non-retryable", err, we)
	}
	_, err = b.Join(ctx, "html")
	if !errors.As(err, &we) || we.Code != "http_500" || !we.Retryable || strings.Contains(err.Error(), "stack") {
		t.Fatalf("html 500: err = %v, want http_500 retryable without the body", err)
	}
	if _, err = b.Join(ctx, "huge"); !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("huge: err = %v, want ErrResponseTooLarge", err)
	}
	start := time.Now()
	if _, err = b.Join(ctx, "slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow: err = %v, want a deadline", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("slow: took %s with a 200ms timeout", d)
	}
	for _, name := range []string{"no-secret", "blank-secret", "no-port", "no-udp", "big-port", "bad-host"} {
		_, err := b.Allocate(ctx, "eu", name, NewAllocationID())
		if !errors.Is(err, wire.ErrRelayBadAnswer) {
			t.Errorf("%s: Allocate err = %v, want relay_bad_answer", name, err)
		}
		if _, err := b.Join(ctx, name); !errors.Is(err, wire.ErrRelayBadAnswer) {
			t.Errorf("%s: Join err = %v, want relay_bad_answer", name, err)
		}
	}
	if _, err := b.Join(ctx, "not-json"); err == nil {
		t.Fatal("not-json: want an error")
	}
	if _, err := NewBalancer("ftp://x").Servers(ctx); err == nil {
		t.Fatal("ftp URL: want an error")
	}
}

// TestLegacyAllocationWithoutHost: an older answer without host is accepted
// (the caller takes host from /servers) but still needs secret and ports.
func TestLegacyAllocationWithoutHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.Header.Get("allocation_id") != "" {
			t.Errorf("legacy allocation sent %s with allocation_id %q", r.Method, r.Header.Get("allocation_id"))
		}
		if r.Header.Get("name") == "bad" {
			w.Write([]byte(`{"ssl":false,"secret":"","port":6942,"udpPort":7777,"udpPortV2":7778}`))
			return
		}
		w.Write([]byte(`{"ssl":false,"secret":"s","port":6942,"udpPort":7777,"udpPortV2":7778}`))
	}))
	t.Cleanup(srv.Close)
	ctx := testCtx(t, 10*time.Second)
	c, err := NewBalancer(srv.URL).AllocateLegacy(ctx, "eu", "room")
	if err != nil || c.Host != "" || c.Secret != "s" || c.Port != 6942 {
		t.Fatalf("AllocateLegacy = %+v, %v", c, err)
	}
	if _, err := NewBalancer(srv.URL).AllocateLegacy(ctx, "eu", "bad"); !errors.Is(err, wire.ErrRelayBadAnswer) {
		t.Fatalf("AllocateLegacy without secret: err = %v", err)
	}
}

// TestAllocateRetry: PurrNet's loop: the same allocation id on every try, 1 s
// apart (injected sleep), the first success wins; Permanent stops early.
func TestAllocateRetry(t *testing.T) {
	var mu sync.Mutex
	var ids []string
	fails := 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, r.Header.Get("allocation_id"))
		if r.Header.Get("name") == "taken" {
			wire.WriteError(w, wire.ErrRoomTaken)
			return
		}
		if fails > 0 {
			fails--
			wire.WriteError(w, wire.ErrIndeterminate)
			return
		}
		w.Write([]byte(goodCap))
	}))
	t.Cleanup(srv.Close)
	ctx := testCtx(t, 10*time.Second)
	var slept []time.Duration
	r := Retry{Sleep: func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return nil }}
	b := NewBalancer(srv.URL)

	c, id, err := b.AllocateRetry(ctx, "eu", "room", r)
	if err != nil || c.Secret != "s3cret" {
		t.Fatalf("AllocateRetry = %+v, %v", c, err)
	}
	mu.Lock()
	if len(ids) != 3 || ids[0] != id || ids[1] != id || ids[2] != id {
		t.Fatalf("allocation ids per try = %v, want 3 times %s", ids, id)
	}
	ids = nil
	mu.Unlock()
	if len(slept) != 2 || slept[0] != time.Second || slept[1] != time.Second {
		t.Fatalf("slept %v, want [1s 1s]", slept)
	}

	// PurrNet retries everything, 10 tries.
	slept = nil
	if _, _, err := b.AllocateRetry(ctx, "eu", "taken", r); !errors.Is(err, wire.ErrRoomTaken) {
		t.Fatalf("taken: err = %v", err)
	}
	mu.Lock()
	if len(ids) != DefaultTries {
		t.Fatalf("taken without Permanent: %d tries, want %d", len(ids), DefaultTries)
	}
	ids = nil
	mu.Unlock()

	// With IsPermanent: one try.
	r.Permanent = IsPermanent
	if _, _, err := b.AllocateRetry(ctx, "eu", "taken", r); !errors.Is(err, wire.ErrRoomTaken) {
		t.Fatalf("taken: err = %v", err)
	}
	mu.Lock()
	if len(ids) != 1 {
		t.Fatalf("taken with IsPermanent: %d tries, want 1", len(ids))
	}
	mu.Unlock()

	// A cancelled context ends the loop at the next pause, keeping the last error.
	cctx, cancel := context.WithCancel(ctx)
	r2 := Retry{Tries: 5, Sleep: func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }}
	_, err = b.JoinRetry(cctx, "taken", r2)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, wire.ErrRoomTaken) {
		t.Fatalf("cancelled retry: err = %v", err)
	}
}

// TestRetryRealSleep keeps the default timer honest with a short delay.
func TestRetryRealSleep(t *testing.T) {
	ctx := testCtx(t, 5*time.Second)
	n := 0
	start := time.Now()
	err := Retry{Tries: 3, Delay: 20 * time.Millisecond}.Do(ctx, func(context.Context) error {
		n++
		return errors.New("boom")
	})
	if err == nil || n != 3 || time.Since(start) < 40*time.Millisecond {
		t.Fatalf("Do: err %v, %d tries in %s", err, n, time.Since(start))
	}
}
