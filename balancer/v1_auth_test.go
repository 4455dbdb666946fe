package balancer

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// v1Paths is one request of every /v1 route (none of them needs a body
// to be refused).
func v1Paths(boot string) [][2]string {
	return [][2]string{
		{http.MethodGet, wire.PathStats},
		{http.MethodGet, wire.PathInstances},
		{http.MethodGet, "/v1/instances/" + boot},
		{http.MethodGet, "/v1/instances/" + boot + "/rooms"},
		{http.MethodPost, "/v1/instances/" + boot + "/drain"},
		{http.MethodPost, "/v1/instances/" + boot + "/undrain"},
		{http.MethodGet, wire.PathRooms},
		{http.MethodPost, wire.PathRooms},
		{http.MethodGet, "/v1/rooms/some-room"},
		{http.MethodDelete, "/v1/rooms/some-room"},
		{http.MethodGet, wire.PathEvents},
		{http.MethodGet, "/v1/nothing-here"},
	}
}

// TestAdminAuthUniform: every /v1 route refuses a missing, wrong,
// malformed or wrong-scheme credential with the same 401 body, and the
// shared SECRET works on the deploy tool's three routes only.
func TestAdminAuthUniform(t *testing.T) {
	h, _ := adminHarness(t, nil, func(o *Options) { o.AuthFailureRate = limit.Rate{Every: -1} })
	r := newFakeRelay(t, "eu")
	r.register(h)
	var want []byte
	bad := []map[string]string{
		nil,
		bearer("not-the-key-0123456789abcdef"),
		bearer(adminKeyA + "x"),
		{"Authorization": "Basic " + adminKeyA},
		{"Authorization": "Bearer"},
		{"Authorization": "Bearer " + adminKeyA + " extra"},
		{"Authorization": adminKeyA},
		{wire.HeaderInternalSecret: adminKeyA},
	}
	for _, p := range v1Paths(r.boot()) {
		for _, hdr := range bad {
			st, body, hd := h.do(p[0], p[1]+"?key="+adminKeyA, hdr, nil)
			if st != http.StatusUnauthorized {
				t.Fatalf("%s %s with %v: %d %s, want 401", p[0], p[1], hdr, st, body)
			}
			if want == nil {
				want = body
			}
			if string(body) != string(want) || hd.Get("WWW-Authenticate") == "" {
				t.Fatalf("%s %s: 401 body %s differs from %s", p[0], p[1], body, want)
			}
		}
	}
	wantErrBody(t, http.StatusUnauthorized, want, http.StatusUnauthorized, wire.ErrUnauthorized.Code)

	legacy := map[string]bool{wire.PathInstances: true, "/v1/instances/" + r.boot() + "/drain": true, "/v1/instances/" + r.boot() + "/undrain": true}
	for _, p := range v1Paths(r.boot()) {
		if p[1] == wire.PathEvents {
			continue // a stream: TestEvents
		}
		for _, hdr := range []map[string]string{bearer(testSecret), {wire.HeaderInternalSecret: testSecret}} {
			st, body, _ := h.do(p[0], p[1], hdr, nil)
			if legacy[p[1]] != (st != http.StatusUnauthorized) {
				t.Fatalf("%s %s with SECRET: %d %s (deploy tool's route: %v)", p[0], p[1], st, body, legacy[p[1]])
			}
		}
		if st, body, _ := h.do(p[0], p[1], bearer(adminKeyA), nil); st == http.StatusUnauthorized {
			t.Fatalf("%s %s with the admin key: %d %s", p[0], p[1], st, body)
		}
	}
}

// TestAdminKeyRotation: with two keys both work; after a restart with
// only the new one, the old is refused.
func TestAdminKeyRotation(t *testing.T) {
	both, _ := adminHarness(t, []string{adminKeyA, adminKeyB}, nil)
	for _, k := range []string{adminKeyA, adminKeyB} {
		if _, err := both.admin(k).Stats(t.Context()); err != nil {
			t.Fatalf("key %s during rotation: %v", Fingerprint(k), err)
		}
	}
	only, _ := adminHarness(t, []string{adminKeyB}, nil)
	if _, err := only.admin(adminKeyB).Stats(t.Context()); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
	if _, err := only.admin(adminKeyA).Stats(t.Context()); !wantWire(err, wire.ErrUnauthorized) {
		t.Fatalf("old key after rotation: %v, want 401", err)
	}
}

func wantWire(err error, target *wire.Error) bool {
	var we *wire.Error
	return err != nil && asWire(err, &we) && we.Code == target.Code && we.Status == target.Status
}

// TestAdminKeyRules: keys under 16 characters, keys equal to SECRET and
// keys that are not printable ASCII are refused; a missing key is refused
// when required (Fly) and generated otherwise (64 hex digits).
func TestAdminKeyRules(t *testing.T) {
	base := Options{Secret: "a-relay-secret-of-some-length-1234", ListenHost: "127.0.0.1", Logger: discard()}
	for _, tc := range []struct {
		name string
		keys []string
		req  bool
	}{
		{"short", []string{"short-key-15chr"}, false},
		{"equals SECRET", []string{base.Secret}, false},
		{"second key equals SECRET", []string{adminKeyA, base.Secret}, false},
		{"space", []string{"a key with spaces in it 123"}, false},
		{"missing on Fly", nil, true},
	} {
		o := base
		o.AdminKeys, o.RequireAdminKey = tc.keys, tc.req
		s, err := New(o)
		if err == nil {
			_ = s.Close()
			t.Fatalf("%s: accepted", tc.name)
		}
		for _, k := range tc.keys {
			if strings.Contains(err.Error(), k) {
				t.Fatalf("%s: the error names the key: %v", tc.name, err)
			}
		}
	}
	o := base
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if k := s.GeneratedAdminKey(); len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("generated key %q is not 32 bytes of hex", k)
	}
	o.AdminKeys = []string{"sixteen-chars-ok"}
	logs := &testutil.Buffer{}
	o.Logger = textLogger(logs)
	s, err = New(o)
	if err != nil || s.GeneratedAdminKey() != "" {
		t.Fatalf("a 16-character key: %v", err)
	}
	if !strings.Contains(logs.String(), "shorter than 32") || !strings.Contains(logs.String(), Fingerprint("sixteen-chars-ok")) {
		t.Fatalf("no warning naming the short key's fingerprint: %s", logs)
	}
}

// TestAdminThrottle: a source's failures past the burst are 429 throttled
// with Retry-After, even with the right key (a guess is never answered
// then); other sources are not affected; the injected clock refills it.
func TestAdminThrottle(t *testing.T) {
	h, _ := adminHarness(t, nil, func(o *Options) {
		o.AuthFailureRate = limit.Rate{Every: 10 * time.Second, Burst: 3}
		o.TrustProxy = true
	})
	from := func(ip, key string) (int, []byte, http.Header) {
		return h.do(http.MethodGet, wire.PathStats, map[string]string{"Authorization": "Bearer " + key, "X-Forwarded-For": "10.0.0.1, " + ip}, nil)
	}
	for i := range 3 {
		if st, body, _ := from("203.0.113.7", "wrong-key-0123456789"); st != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s", i, st, body)
		}
	}
	st, body, hd := from("203.0.113.7", adminKeyA)
	wantErrBody(t, st, body, http.StatusTooManyRequests, wire.ErrThrottled.Code)
	if e := wire.DecodeError(st, body); !e.Retryable || hd.Get("Retry-After") != "10" {
		t.Fatalf("throttled answer: %s Retry-After %q", body, hd.Get("Retry-After"))
	}
	if st, _, _ := from("203.0.113.8", adminKeyA); st != http.StatusOK {
		t.Fatalf("another source: %d", st)
	}
	h.clk.Advance(10 * time.Second)
	if st, _, _ := from("203.0.113.7", adminKeyA); st != http.StatusOK {
		t.Fatalf("after the refill: %d", st)
	}
}

// TestAdminThrottleBurstOfNone: a failure rate with no burst is taken as
// a burst of one, so a source that failed gets in again once a token has
// refilled (with none, its right key stayed refused for good).
func TestAdminThrottleBurstOfNone(t *testing.T) {
	h, _ := adminHarness(t, nil, func(o *Options) {
		o.AuthFailureRate = limit.Rate{Every: time.Minute}
		o.TrustProxy = true
	})
	from := func(key string) int {
		st, _, _ := h.do(http.MethodGet, wire.PathStats, map[string]string{"Authorization": "Bearer " + key, "X-Forwarded-For": "10.0.0.1, 203.0.113.10"}, nil)
		return st
	}
	if st := from("wrong-key-0123456789"); st != http.StatusUnauthorized {
		t.Fatalf("the first failure: %d", st)
	}
	if st := from(adminKeyA); st != http.StatusTooManyRequests {
		t.Fatalf("right after it: %d, want 429", st)
	}
	h.clk.Advance(time.Minute)
	if st := from(adminKeyA); st != http.StatusOK {
		t.Fatalf("a minute later: %d, want 200", st)
	}
}

// TestAdminThrottleConcurrentGuesses: a source's guesses sent all at once
// are answered no more often than its burst allows; the rest are throttled
// whatever they say. (With the throttle checked before the credential and
// the failure recorded after, each of them used to get its answer.) Right
// keys take no token.
func TestAdminThrottleConcurrentGuesses(t *testing.T) {
	h, _ := adminHarness(t, nil, func(o *Options) {
		o.AuthFailureRate = limit.Rate{Every: time.Hour, Burst: 3}
		o.TrustProxy = true
	})
	get := func(key string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, h.s.URL()+wire.PathStats, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Forwarded-For", "10.0.0.1, 203.0.113.9")
		resp, err := h.client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for range 20 { // right keys, one after another: no token is taken
		if st, err := get(adminKeyA); err != nil || st != http.StatusOK {
			t.Fatalf("a right key: %d %v", st, err)
		}
	}
	// Every guess waits between its check and the throttle's decision
	// until all have been checked: decisions cannot take turns with checks.
	const guesses = 64
	var checked atomic.Int32
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	h.s.beforeAdmit = func() {
		checked.Add(1)
		<-release
	}
	type answer struct {
		status int
		err    error
	}
	answers := make(chan answer, guesses)
	for range guesses {
		go func() {
			st, err := get("wrong-key-0123456789")
			answers <- answer{st, err}
		}()
	}
	waitFor(t, "every guess checked", func() bool { return checked.Load() == guesses })
	once.Do(func() { close(release) })
	counts := map[int]int{}
	for range guesses {
		a := <-answers
		if a.err != nil {
			t.Fatal(a.err)
		}
		counts[a.status]++
	}
	if counts[http.StatusUnauthorized] != 3 || counts[http.StatusTooManyRequests] != guesses-3 {
		t.Fatalf("%d concurrent guesses: %v, want 3 answered (401) and the rest throttled (429)", guesses, counts)
	}
	if st, err := get(adminKeyA); err != nil || st != http.StatusTooManyRequests {
		t.Fatalf("a right key from the throttled source: %d %v, want 429", st, err)
	}
}

// TestAdminThrottleBound: however many sources fail, the server's /v1
// throttle holds at most AuthThrottleSources (the throttle's own bound is
// tested in internal/limit).
func TestAdminThrottleBound(t *testing.T) {
	h2, _ := adminHarness(t, nil, func(o *Options) { o.AuthThrottleSources = 8; o.TrustProxy = true })
	for i := range 50 {
		h2.do(http.MethodGet, wire.PathStats, map[string]string{"X-Forwarded-For": "192.0.2." + strconv.Itoa(i)}, nil)
	}
	if n := h2.s.authThrottle.Len(); n != 8 {
		t.Fatalf("server throttle holds %d sources, want its cap 8", n)
	}
}

// TestAdminLogsNoKey: across successes, failures, throttling and audited
// mutations, no log line carries a key, a piece of one, or its length;
// audited lines name the key by fingerprint.
func TestAdminLogsNoKey(t *testing.T) {
	h, logs := adminHarness(t, []string{adminKeyA, adminKeyB}, func(o *Options) {
		o.AuthFailureRate = limit.Rate{Every: time.Minute, Burst: 2}
	})
	r := newFakeRelay(t, "eu")
	r.register(h)
	for _, k := range []string{adminKeyA, adminKeyB} {
		a := h.admin(k)
		if _, err := a.Drain(t.Context(), r.boot()); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Undrain(t.Context(), r.boot()); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Reserve(t.Context(), wire.ReserveRequest{Name: "logged-" + k[8:9], AllocationID: "x1"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 { // two failures, then throttled
		h.do(http.MethodGet, wire.PathStats, bearer(adminKeyA[:len(adminKeyA)-1]), nil)
	}
	out := logs.String()
	if !strings.Contains(out, `method=POST route=/v1/rooms target="room \"logged-a\" allocation \"x1\""`) {
		t.Fatalf("the reservation's audit line does not say what was reserved:\n%s", out)
	}
	if !strings.Contains(out, "admin audit") || !strings.Contains(out, "admin#"+Fingerprint(adminKeyA)) ||
		!strings.Contains(out, "admin#"+Fingerprint(adminKeyB)) || !strings.Contains(out, "admin authentication failed") {
		t.Fatalf("missing audit or failure lines:\n%s", out)
	}
	// Any 6 characters of a key (past its "adm-k…" prefix; 8 of the
	// shorter, wordier SECRET) in a log line is a leak: the test keys share
	// no such run with anything logged. So is a key's length.
	for _, c := range []struct {
		key  string
		from int
		w    int
	}{{adminKeyA, 6, 6}, {adminKeyB, 6, 6}, {testSecret, 0, 8}} {
		k := c.key[c.from:]
		for i := 0; i+c.w <= len(k); i++ {
			if strings.Contains(out, k[i:i+c.w]) {
				t.Fatalf("a log line carries part of a key (%q):\n%s", k[i:i+c.w], out)
			}
		}
		if regexp.MustCompile(`[=:" ]` + strconv.Itoa(len(c.key)) + `([ ",}\n]|$)`).MatchString(out) {
			t.Fatalf("a log line carries a key's length %d:\n%s", len(c.key), out)
		}
	}
}
