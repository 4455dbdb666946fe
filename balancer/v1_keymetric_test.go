package balancer

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// Keys of a rotation, each with a distinctive start, so that any prefix
// of one found in /metrics or the logs is a leak, not a coincidence.
const (
	rotOldKey = "Q7zRv-old-9f3kL2mX8pV4nB6cT1wYhG"
	rotNewKey = "J5hWx-new-2d8sF0gA7qE3uZ9xC4vNkP"
)

// adminRequests is purrfly_balancer_admin_requests_total{key=cred} in
// h's /metrics, or -1 when the series is missing.
func adminRequests(t *testing.T, metrics, cred string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^purrfly_balancer_admin_requests_total\{key="` + regexp.QuoteMeta(cred) + `"\} (\d+)$`).FindStringSubmatch(metrics)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatalf("%s: %v", m[0], err)
	}
	return n
}

// TestAdminRequestsCountedPerKey: during a rotation, each configured key's
// authenticated /v1 requests count apart under its fingerprint (both
// from 0, reads included, failures not), the SECRET's under "secret";
// each event stream opened is logged once with its key's fingerprint;
// and neither /metrics nor the logs carry a key, a prefix of one or its
// length.
func TestAdminRequestsCountedPerKey(t *testing.T) {
	h, logs := adminHarness(t, []string{rotOldKey, rotNewKey}, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	oldC, newC := "admin#"+Fingerprint(rotOldKey), "admin#"+Fingerprint(rotNewKey)
	counts := func() (int, int, int) {
		m := string(scrape(t, h))
		return adminRequests(t, m, oldC), adminRequests(t, m, newC), adminRequests(t, m, "secret")
	}
	if o, n, s := counts(); o != 0 || n != 0 || s != 0 {
		t.Fatalf("before any call: old %d, new %d, secret %d; want every series at 0", o, n, s)
	}

	// Reads with the old key only: the new key's count stays.
	old := h.admin(rotOldKey)
	for range 3 {
		if _, err := old.Stats(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if st, body, _ := h.do(http.MethodGet, wire.PathStats, bearer(rotNewKey+"x"), nil); st != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d %s", st, body)
	}
	if o, n, s := counts(); o != 3 || n != 0 || s != 0 {
		t.Fatalf("after 3 reads with the old key and a refused one: old %d, new %d, secret %d; want 3, 0, 0", o, n, s)
	}

	// The callers move to the new key: a read, a stream, a mutation; the
	// deploy tool's SECRET counts apart.
	neu := h.admin(rotNewKey)
	if _, err := neu.Instances(t.Context()); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, openEvents(t, neu), wire.EventStats)
	if _, err := neu.Drain(t.Context(), r.boot()); err != nil {
		t.Fatal(err)
	}
	if st, body, _ := h.do(http.MethodGet, wire.PathInstances, bearer(testSecret), nil); st != http.StatusOK {
		t.Fatalf("SECRET on /v1/instances: %d %s", st, body)
	}
	if o, n, s := counts(); o != 3 || n != 3 || s != 1 {
		t.Fatalf("after the move: old %d, new %d, secret %d; want 3, 3, 1", o, n, s)
	}

	// A stream with the old key too: one line per stream, naming its key.
	nextEvent(t, openEvents(t, old), wire.EventStats)
	out := logs.String()
	for _, c := range []string{oldC, newC} {
		if n := strings.Count(out, `msg="admin event stream opened" route=/v1/events key=`+c+" "); n != 1 {
			t.Fatalf("%d stream lines for %s, want 1:\n%s", n, c, out)
		}
	}

	text := string(scrape(t, h)) + out
	for _, k := range []string{rotOldKey, rotNewKey} {
		for n := 4; n <= len(k); n++ {
			if strings.Contains(text, k[:n]) {
				t.Fatalf("/metrics or the logs carry the first %d characters of a key (%q)", n, k[:n])
			}
		}
		if regexp.MustCompile(`[=:" ]` + strconv.Itoa(len(k)) + `([ ",}\n]|$)`).MatchString(out) {
			t.Fatalf("a log line carries a key's length %d:\n%s", len(k), out)
		}
	}
}
