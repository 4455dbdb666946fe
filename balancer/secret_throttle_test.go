package balancer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// secretCall sends an internal or /metrics request with secret from c (a
// client bound to its own loopback address: its source).
func secretCall(t *testing.T, h *harness, c *http.Client, method, path string, hdr map[string]string, body any) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.s.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(wire.HeaderInternalVersion, strconv.Itoa(wire.InternalProtocolVersion))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return send(t, c, req)
}

func internalSecretHdr(secret string) map[string]string {
	return map[string]string{wire.HeaderInternalSecret: secret}
}

// wantThrottled checks a 429 throttled answer in the purrfly shape, with
// Retry-After want.
func wantThrottled(t *testing.T, what string, st int, body []byte, hd http.Header, want string) {
	t.Helper()
	wantErrBody(t, st, body, http.StatusTooManyRequests, wire.ErrThrottled.Code)
	if e := wire.DecodeError(st, body); !e.Retryable || hd.Get("Retry-After") != want {
		t.Fatalf("%s: %s with Retry-After %q, want retryable and %q", what, body, hd.Get("Retry-After"), want)
	}
}

// TestSecretThrottle: at the default rate, a source that sent ten wrong
// SECRETs to the internal routes is answered 429 throttled with
// Retry-After (and the internal version), its right SECRET included, while
// a relay at another address registers as ever; a second later it is let
// in again.
func TestSecretThrottle(t *testing.T) {
	h := newHarness(t, nil)
	bad, good := testutil.ClientFrom(t, "127.0.0.2"), testutil.ClientFrom(t, "127.0.0.3")
	r := newFakeRelay(t, "eu")
	reg := wire.RegisterRequest{Relay: r.info}
	for range DefaultSecretFailureRate.Burst {
		st, body, _ := secretCall(t, h, bad, http.MethodPost, wire.PathRegister, internalSecretHdr("stale-secret-value"), reg)
		wantErrBody(t, st, body, http.StatusUnauthorized, wire.ErrUnauthorized.Code)
	}
	for _, p := range [][2]string{{http.MethodPost, wire.PathRegister}, {http.MethodPost, wire.PathPublish}, {http.MethodGet, wire.PathBalancerBoot}} {
		st, body, hd := secretCall(t, h, bad, p[0], p[1], internalSecretHdr(testSecret), reg)
		wantThrottled(t, "the throttled source's right SECRET on "+p[1], st, body, hd, "1")
		if hd.Get(wire.HeaderInternalVersion) == "" {
			t.Fatalf("throttled answer on %s without the internal version", p[1])
		}
	}
	if st, body, _ := secretCall(t, h, good, http.MethodPost, wire.PathRegister, internalSecretHdr(testSecret), reg); st != http.StatusOK {
		t.Fatalf("a relay at another address: %d %s", st, body)
	}
	h.clk.Advance(time.Second)
	if st, body, _ := secretCall(t, h, bad, http.MethodPost, wire.PathRegister, internalSecretHdr(testSecret), reg); st != http.StatusOK {
		t.Fatalf("a second later, the right SECRET: %d %s", st, body)
	}
	// One token came back, and a right SECRET took none: one more wrong
	// one is answered, the next is throttled again.
	st, body, _ := secretCall(t, h, bad, http.MethodPost, wire.PathRegister, internalSecretHdr("stale-secret-value"), reg)
	wantErrBody(t, st, body, http.StatusUnauthorized, wire.ErrUnauthorized.Code)
	st, body, hd := secretCall(t, h, bad, http.MethodPost, wire.PathRegister, internalSecretHdr("stale-secret-value"), reg)
	wantThrottled(t, "the next wrong SECRET", st, body, hd, "1")
}

// TestSecretThrottleSharedAddress: relays behind one address share its
// bucket. Two with a wrong SECRET booting together and retrying on the
// registrar's schedule (a doubling backoff from 250 ms up to the 30 s
// heartbeat) never lock out a good relay at their address: the default
// bucket refills faster than they fail. A flood that does empty it locks
// the good relay out for a second.
func TestSecretThrottleSharedAddress(t *testing.T) {
	h := newHarness(t, nil)
	nat := testutil.ClientFrom(t, "127.0.0.2")
	r := newFakeRelay(t, "eu")
	reg := wire.RegisterRequest{Relay: r.info}
	goodRelay := func(what string) {
		t.Helper()
		if st, body, _ := secretCall(t, h, nat, http.MethodPost, wire.PathRegister, internalSecretHdr(testSecret), reg); st != http.StatusOK {
			t.Fatalf("%s, a good relay at their address: %d %s", what, st, body)
		}
	}
	backoff := time.Duration(0)
	for i := range 12 { // their first two minutes: 0, 0.25, 0.75, 1.75 s ... then every 30 s
		for range 2 {
			st, body, _ := secretCall(t, h, nat, http.MethodPost, wire.PathRegister, internalSecretHdr("stale-secret-value"), reg)
			wantErrBody(t, st, body, http.StatusUnauthorized, wire.ErrUnauthorized.Code)
		}
		goodRelay(fmt.Sprintf("after the misconfigured relays' failure %d", i+1))
		backoff = min(max(2*backoff, 250*time.Millisecond), 30*time.Second)
		h.clk.Advance(backoff)
	}
	for range 100 {
		secretCall(t, h, nat, http.MethodGet, wire.PathBalancerBoot, internalSecretHdr("stale-secret-value"), nil)
	}
	st, body, hd := secretCall(t, h, nat, http.MethodPost, wire.PathRegister, internalSecretHdr(testSecret), reg)
	wantThrottled(t, "a good relay during a flood from its address", st, body, hd, "1")
	h.clk.Advance(time.Second)
	goodRelay("a second after the flood")
}

// TestSecretGuardComparesNothingWhenThrottled: a throttled source is
// answered before its secret is compared at all.
func TestSecretGuardComparesNothingWhenThrottled(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SecretFailureRate = limit.Rate{Every: time.Minute, Burst: 2} })
	compared := 0
	wrong := func(*http.Request, string) error { compared++; return wire.ErrUnauthorized }
	guard := func() (int, http.Header) {
		req := httptest.NewRequest(http.MethodPost, wire.PathRegister, nil)
		req.RemoteAddr = "192.0.2.1:4000"
		w := httptest.NewRecorder()
		err := h.s.secretGuard(w, req, wrong)
		var we *wire.Error
		if !asWire(err, &we) {
			t.Fatalf("secretGuard: %v", err)
		}
		return we.Status, w.Header()
	}
	for range 2 {
		if st, _ := guard(); st != http.StatusUnauthorized {
			t.Fatalf("a failure within the burst: %d", st)
		}
	}
	st, hd := guard()
	if st != http.StatusTooManyRequests || hd.Get("Retry-After") != "60" {
		t.Fatalf("past the burst: %d Retry-After %q, want 429 and 60", st, hd.Get("Retry-After"))
	}
	if compared != 2 {
		t.Fatalf("the secret was compared %d times, want 2 (not for the throttled call)", compared)
	}
}

// TestSecretThrottleMetrics: /metrics from the internet (through Fly's
// proxy: Fly-Client-IP) with a wrong SECRET is throttled too, in the
// same bucket as the internal routes (one budget of guesses per source);
// the private network still reads it freely.
func TestSecretThrottleMetrics(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SecretFailureRate = limit.Rate{Every: 5 * time.Second, Burst: 3} })
	bad := testutil.ClientFrom(t, "127.0.0.2")
	public := func(secret string) map[string]string {
		return map[string]string{wire.HeaderFlyClientIP: "203.0.113.5", "Authorization": "Bearer " + secret}
	}
	for range 3 {
		st, body, _ := secretCall(t, h, bad, http.MethodGet, "/metrics", public("stale-secret-value"), nil)
		wantErrBody(t, st, body, http.StatusUnauthorized, wire.ErrUnauthorized.Code)
	}
	st, body, hd := secretCall(t, h, bad, http.MethodGet, "/metrics", public(testSecret), nil)
	wantThrottled(t, "/metrics with the right SECRET from the throttled source", st, body, hd, "5")
	st, body, hd = secretCall(t, h, bad, http.MethodGet, wire.PathBalancerBoot, internalSecretHdr(testSecret), nil)
	wantThrottled(t, "an internal route from the source /metrics throttled", st, body, hd, "5")
	if st, body, _ := secretCall(t, h, bad, http.MethodGet, "/metrics", nil, nil); st != http.StatusOK {
		t.Fatalf("/metrics over the private network: %d %s", st, body)
	}
	h.clk.Advance(5 * time.Second)
	if st, body, _ := secretCall(t, h, bad, http.MethodGet, "/metrics", public(testSecret), nil); st != http.StatusOK {
		t.Fatalf("/metrics with the right SECRET after the refill: %d %.200s", st, body)
	}
}

// TestSecretThrottleBound: however many sources send a wrong SECRET, the
// throttle remembers at most AuthThrottleSources of them.
func TestSecretThrottleBound(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.AuthThrottleSources = 8; o.ClientIPHeader = wire.HeaderFlyClientIP })
	for i := range 50 {
		hdr := map[string]string{wire.HeaderInternalSecret: "stale-secret-value", wire.HeaderFlyClientIP: fmt.Sprintf("192.0.2.%d", i)}
		st, body, _ := h.do(http.MethodGet, wire.PathBalancerBoot, hdr, nil)
		wantErrBody(t, st, body, http.StatusUnauthorized, wire.ErrUnauthorized.Code)
		if n := h.s.secretThrottle.Len(); n > 8 {
			t.Fatalf("after %d sources the SECRET throttle holds %d, over its cap 8", i+1, n)
		}
	}
	if n := h.s.secretThrottle.Len(); n != 8 {
		t.Fatalf("the SECRET throttle holds %d sources, want its cap 8", n)
	}
}

// TestSecretThrottleConcurrentGuesses: wrong SECRETs sent all at once
// from one source are answered no more often than the burst allows,
// however they interleave; the rest are throttled.
func TestSecretThrottleConcurrentGuesses(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SecretFailureRate = limit.Rate{Every: time.Hour, Burst: 3} })
	const guesses = 48
	counts := testutil.StatusCounts(testutil.ClientFrom(t, "127.0.0.2"), guesses, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodGet, h.s.URL()+wire.PathBalancerBoot, nil)
		if err == nil {
			req.Header.Set(wire.HeaderInternalSecret, "stale-secret-value")
		}
		return req, err
	})
	if counts[http.StatusUnauthorized] != 3 || counts[http.StatusTooManyRequests] != guesses-3 {
		t.Fatalf("%d concurrent wrong SECRETs: %v, want 3 answered (401) and the rest throttled (429)", guesses, counts)
	}
}
