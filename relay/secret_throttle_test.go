package relay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

const staleSecret = "stale-secret-value"

// secretRoute is one route the relay guards with the SECRET, called so
// that it succeeds when let through with the right one, or (write) so
// that the test calls it only where it must be refused.
type secretRoute struct {
	method, path string
	hdr          map[string]string
	write        bool // changes the relay when let through: sent only to be throttled
}

// guardedRoutes are every route behind secretGuard: the internal ones
// (the forward upgrade among them) and a migration call.
func guardedRoutes() []secretRoute {
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", wire.HeaderForwardedBy: "m-guess"}
	return []secretRoute{
		{method: http.MethodGet, path: wire.PathRelayRooms},
		{method: http.MethodGet, path: wire.PathRelayRetire},
		{method: http.MethodPost, path: wire.PathRelayAllocate, hdr: map[string]string{wire.HeaderName: "guess", wire.HeaderAllocationID: "a-guess"}, write: true},
		{method: http.MethodPost, path: wire.PathRelayRoomClose, hdr: map[string]string{wire.HeaderName: "guess"}, write: true},
		{method: http.MethodPost, path: wire.PathHandover, write: true},
		{method: http.MethodGet, path: wire.PathForward, hdr: upgrade, write: true},
		{method: wire.OpCurrent.Method(), path: wire.OpCurrent.RelayPath(), write: true},
	}
}

// secretCall sends one request to s from c with hdr (a secret among them,
// or none), and answers the status, body and headers.
func secretCall(t *testing.T, s *Server, c *http.Client, method, path string, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.HTTPURL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, resp.Header
}

func withSecret(hdr map[string]string, secret string) map[string]string {
	out := map[string]string{wire.HeaderInternalSecret: secret}
	for k, v := range hdr {
		out[k] = v
	}
	return out
}

// wantThrottled checks a 429 throttled answer in the purrfly shape
// ({"code","error","retryable"}), retryable, with Retry-After want and
// the internal version header the relay's answers carry.
func wantThrottled(t *testing.T, what string, st int, body []byte, hd http.Header, want string) {
	t.Helper()
	e := wire.DecodeError(st, body)
	if st != http.StatusTooManyRequests || e.Code != wire.ErrThrottled.Code || !e.Retryable || e.Message == "" ||
		!strings.Contains(string(body), `"retryable":true`) || hd.Get("Retry-After") != want {
		t.Fatalf("%s: %d %s Retry-After %q, want 429 throttled, retryable, Retry-After %q", what, st, body, hd.Get("Retry-After"), want)
	}
	if hd.Get(wire.HeaderInternalVersion) == "" {
		t.Fatalf("%s: a throttled answer without the internal version header", what)
	}
}

func wantUnauthorized(t *testing.T, what string, st int, body []byte) {
	t.Helper()
	if e := wire.DecodeError(st, body); st != http.StatusUnauthorized || e.Code != wire.ErrUnauthorized.Code {
		t.Fatalf("%s: %d %s, want 401 unauthorized", what, st, body)
	}
}

// TestRelaySecretThrottle: a source that sent ten wrong SECRETs (the
// balancer's rate, limit.DefaultSecretFailureRate) is answered 429
// throttled with Retry-After on every guarded route, its right SECRET
// included (the forward upgrade is not upgraded); the balancer at another
// address allocates and reads as ever; a second later the source is let
// in again, with one more wrong guess before it is throttled again.
func TestRelaySecretThrottle(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := startRelay(t, Options{Clock: clk})
	guesser, balancer := testutil.ClientFrom(t, "127.0.0.2"), testutil.ClientFrom(t, "127.0.0.3")
	for i := range limit.DefaultSecretFailureRate.Burst {
		rt := guardedRoutes()[i%2] // reads: a wrong SECRET is answered 401
		st, body, _ := secretCall(t, s, guesser, rt.method, rt.path, withSecret(rt.hdr, staleSecret))
		wantUnauthorized(t, fmt.Sprintf("wrong SECRET %d", i+1), st, body)
	}
	for _, rt := range guardedRoutes() {
		st, body, hd := secretCall(t, s, guesser, rt.method, rt.path, withSecret(rt.hdr, testSecret))
		wantThrottled(t, "the throttled source's right SECRET on "+rt.method+" "+rt.path, st, body, hd, "1")
	}
	if st := s.Stats(); st.Rooms != 0 {
		t.Fatalf("a throttled allocation made a room: %+v", st)
	}
	if _, st, e := allocate(t, s, "room", "alloc-room"); st != http.StatusOK {
		t.Fatalf("the balancer at another address: allocate %d %v", st, e)
	}
	for _, rt := range guardedRoutes()[:2] {
		if st, body, _ := secretCall(t, s, balancer, rt.method, rt.path, withSecret(rt.hdr, testSecret)); st != http.StatusOK {
			t.Fatalf("another address, %s: %d %s", rt.path, st, body)
		}
	}
	clk.Advance(time.Second)
	for i, rt := range guardedRoutes()[:2] { // a right SECRET takes no token
		if st, body, _ := secretCall(t, s, guesser, rt.method, rt.path, withSecret(rt.hdr, testSecret)); st != http.StatusOK {
			t.Fatalf("a second later, right SECRET %d: %d %s", i+1, st, body)
		}
	}
	st, body, _ := secretCall(t, s, guesser, http.MethodGet, wire.PathRelayRooms, withSecret(nil, staleSecret))
	wantUnauthorized(t, "the one wrong SECRET the refill allows", st, body)
	st, body, hd := secretCall(t, s, guesser, http.MethodGet, wire.PathRelayRooms, withSecret(nil, staleSecret))
	wantThrottled(t, "the next wrong SECRET", st, body, hd, "1")
}

// TestRelaySecretThrottleMetrics: /metrics from the internet (through
// Fly's proxy: Fly-Client-IP, which the relay keys on) with a wrong
// SECRET is throttled per client address, in the same bucket as the
// internal routes; another internet address, and the private network
// (Fly's scraper, no header), read it as ever.
func TestRelaySecretThrottleMetrics(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := startRelay(t, Options{Clock: clk, ClientIPHeader: wire.HeaderFlyClientIP})
	proxy := testutil.ClientFrom(t, "127.0.0.2") // Fly's proxy: every internet client comes through it
	public := func(ip, secret string) map[string]string {
		return map[string]string{wire.HeaderFlyClientIP: ip, wire.HeaderFlyForwardedPort: "443", "Authorization": "Bearer " + secret}
	}
	for i := range limit.DefaultSecretFailureRate.Burst {
		st, body, _ := secretCall(t, s, proxy, http.MethodGet, "/metrics", public("203.0.113.5", staleSecret))
		wantUnauthorized(t, fmt.Sprintf("/metrics, wrong SECRET %d", i+1), st, body)
	}
	st, body, hd := secretCall(t, s, proxy, http.MethodGet, "/metrics", public("203.0.113.5", testSecret))
	wantThrottled(t, "/metrics with the right SECRET from the throttled address", st, body, hd, "1")
	hdr := withSecret(map[string]string{wire.HeaderFlyClientIP: "203.0.113.5"}, testSecret)
	st, body, hd = secretCall(t, s, proxy, http.MethodGet, wire.PathRelayRooms, hdr)
	wantThrottled(t, "an internal route from the address /metrics throttled", st, body, hd, "1")
	if st, body, _ := secretCall(t, s, proxy, http.MethodGet, "/metrics", public("203.0.113.6", testSecret)); st != http.StatusOK {
		t.Fatalf("/metrics from another internet address: %d %.200s", st, body)
	}
	if st, body, _ := secretCall(t, s, proxy, http.MethodGet, "/metrics", nil); st != http.StatusOK {
		t.Fatalf("/metrics over the private network: %d %.200s", st, body)
	}
	clk.Advance(time.Second)
	if st, body, _ := secretCall(t, s, proxy, http.MethodGet, "/metrics", public("203.0.113.5", testSecret)); st != http.StatusOK {
		t.Fatalf("/metrics with the right SECRET a second later: %d %.200s", st, body)
	}
}

// TestRelaySecretThrottleBound: however many addresses send wrong
// SECRETs, the throttle remembers at most its cap, dropping the least
// recent: the last addresses are still throttled, the first is not.
func TestRelaySecretThrottleBound(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := startRelay(t, Options{Clock: clk, ClientIPHeader: wire.HeaderFlyClientIP}, func(s *Server) {
		s.secretThrottle = limit.NewAuthThrottle(limit.DefaultSecretFailureRate, clk, 8)
	})
	c := testutil.ClientFrom(t, "127.0.0.2")
	from := func(i int, secret string) (int, []byte, http.Header) {
		hdr := withSecret(map[string]string{wire.HeaderFlyClientIP: fmt.Sprintf("192.0.2.%d", i)}, secret)
		return secretCall(t, s, c, http.MethodGet, wire.PathRelayRooms, hdr)
	}
	const sources = 50
	for i := range sources {
		for range limit.DefaultSecretFailureRate.Burst {
			st, body, _ := from(i, staleSecret)
			wantUnauthorized(t, fmt.Sprintf("source %d", i), st, body)
		}
		if n := s.secretThrottle.Len(); n > 8 {
			t.Fatalf("after %d sources the throttle holds %d, over its cap 8", i+1, n)
		}
	}
	if n := s.secretThrottle.Len(); n != 8 {
		t.Fatalf("the throttle holds %d sources, want its cap 8", n)
	}
	st, body, hd := from(sources-1, testSecret)
	wantThrottled(t, "the last source's right SECRET", st, body, hd, "1")
	if st, body, _ := from(0, testSecret); st != http.StatusOK {
		t.Fatalf("the first source (forgotten) with the right SECRET: %d %s", st, body)
	}
}

// TestRelaySecretThrottleConcurrentGuesses: wrong SECRETs sent all at
// once from one address are answered no more often than the burst
// allows, however they interleave; the rest are throttled.
func TestRelaySecretThrottleConcurrentGuesses(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := startRelay(t, Options{Clock: clk})
	const guesses = 48
	counts := testutil.StatusCounts(testutil.ClientFrom(t, "127.0.0.2"), guesses, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodGet, s.HTTPURL()+wire.PathRelayRooms, nil)
		if err == nil {
			req.Header.Set(wire.HeaderInternalSecret, staleSecret)
		}
		return req, err
	})
	burst := limit.DefaultSecretFailureRate.Burst
	if counts[http.StatusUnauthorized] != burst || counts[http.StatusTooManyRequests] != guesses-burst {
		t.Fatalf("%d concurrent wrong SECRETs: %v, want %d answered (401) and the rest throttled (429)", guesses, counts, burst)
	}
}

// TestRelaySecretThrottleSparesSiblings: a guesser that has emptied its
// bucket on a machine of a multi-machine app does not stop the app's
// other machine from forwarding a player to it (the forward link comes
// from the sibling's own address), and the guesser's own forward upgrade
// with the right SECRET is refused before any upgrade.
func TestRelaySecretThrottleSparesSiblings(t *testing.T) {
	m := newMeshRoom(t)
	guesser := testutil.ClientFrom(t, "127.0.0.2")
	fwd := guardedRoutes()[5]
	for range limit.DefaultSecretFailureRate.Burst {
		st, body, _ := secretCall(t, m.holder, guesser, fwd.method, fwd.path, withSecret(fwd.hdr, staleSecret))
		wantUnauthorized(t, "a guessed forward link", st, body)
	}
	st, body, hd := secretCall(t, m.holder, guesser, fwd.method, fwd.path, withSecret(fwd.hdr, testSecret))
	wantThrottled(t, "the guesser's forward link with the right SECRET", st, body, hd, "1")
	// Players without a hint land on the edge: forwarded to the holder
	// (the room is in use there, so it stays: handover.go).
	join(t, m.holder, "room", m.clientSecr)
	host := join(t, m.edge, "room", m.hostSecret)
	host.ExpectToHost(wire.ToHostConnected)
	client := join(t, m.edge, "room", m.clientSecr)
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	client.Send([]byte("hi"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != id || string(p.Payload) != "hi" {
		t.Fatalf("a forwarded client's message through the holder: %v", p)
	}
	if n := counterValue(m.edge.mesh.m.forwards.WithLabelValues("ok")); n != 2 {
		t.Fatalf("forwards ok = %v, want 2", n)
	}
}

// TestRelayRefusedSecretsCountedAndLogged: every call refused for a wrong
// SECRET counts in purrfly_relay_internal_auth_failures_total, and the log
// says so once per 10 s with how many were refused since its last line,
// never the secrets tried.
func TestRelayRefusedSecretsCountedAndLogged(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	logs := &testutil.Buffer{}
	s := startRelay(t, Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	c := testutil.ClientFrom(t, "127.0.0.2")
	wrong := func() {
		t.Helper()
		st, body, _ := secretCall(t, s, c, http.MethodGet, wire.PathRelayRooms, withSecret(nil, staleSecret))
		wantUnauthorized(t, "a wrong SECRET", st, body)
	}
	lines := func() int { return strings.Count(logs.String(), "refused a call: wrong SECRET") }
	for range 3 {
		wrong()
	}
	if got := counterValue(s.m.authFailures); got != 3 {
		t.Fatalf("counted %v refusals, want 3", got)
	}
	if n := lines(); n != 1 {
		t.Fatalf("%d log lines for 3 refusals within 10 s, want 1:\n%s", n, logs.String())
	}
	clk.Advance(refusedLogGap)
	wrong()
	if n := lines(); n != 2 || !strings.Contains(logs.String(), "refused_since_last_line=3") {
		t.Fatalf("after the gap: %d lines, want 2, the second counting 3:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), staleSecret) || strings.Contains(logs.String(), testSecret) {
		t.Fatal("the log holds a secret")
	}
}
