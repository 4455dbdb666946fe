package relay

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// getReady is GET /ready: the status and the body.
func getReady(t *testing.T, s *Server) (int, string) {
	t.Helper()
	resp, err := http.Get(s.HTTPURL() + wire.PathReady)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// notReady fails unless /ready answers 503 not_ready whose message has want.
func notReady(t *testing.T, s *Server, want string) string {
	t.Helper()
	code, body := getReady(t, s)
	var e wire.Error
	if code != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || e.Code != "not_ready" || !e.Retryable ||
		!strings.Contains(e.Message, want) {
		t.Fatalf("/ready: %d %s, want 503 not_ready saying %q", code, body, want)
	}
	return e.Message
}

// TestReadyMeansRegistered: /ready is 200 only while the boot is
// registered with the balancer: not before the first accepted heartbeat,
// still while the balancer briefly refuses it, no longer once the
// balancer would have dropped the boot (three intervals), and again after
// the next accepted heartbeat.
func TestReadyMeansRegistered(t *testing.T) {
	s, fb, fake := startRegistered(t)
	code, body := getReady(t, s)
	var r wire.Readiness
	if code != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil || !r.Ready || r.BootID != "relay-boot-1" ||
		!r.RegisteredAt.Equal(time.Unix(2_000_000, 0)) {
		t.Fatalf("/ready after the first heartbeat: %d %s", code, body)
	}
	refuse := func(n int) {
		fb.mu.Lock()
		fb.refuseRegisters = n
		fb.mu.Unlock()
	}
	refuse(1000)     // 409 boot_not_proven to every heartbeat
	beat(t, s, fake) // 30 s without an accepted heartbeat
	beat(t, s, fake) // 60 s
	if code, body := getReady(t, s); code != http.StatusOK {
		t.Fatalf("/ready 60 s into a balancer outage (the balancer still lists the boot): %d %s", code, body)
	}
	beat(t, s, fake) // 90 s: the balancer's expiry
	notReady(t, s, "the balancer has dropped this boot: the balancer at "+fb.srv.URL+" refused the registration: boot_not_proven")
	refuse(0)
	beat(t, s, fake)
	if code, body := getReady(t, s); code != http.StatusOK {
		t.Fatalf("/ready after the balancer came back: %d %s", code, body)
	}
}

// TestReadyWrongSecretSaysWhy: a relay whose SECRET the balancer refuses
// is never ready, and says so without showing any secret; /ping still
// answers (the process is up).
func TestReadyWrongSecretSaysWhy(t *testing.T) {
	fb := newFakeBalancer(t)
	fake := clock.NewFake(time.Unix(2_000_000, 0))
	s := startRelay(t, Options{BalancerURL: fb.srv.URL, Clock: fake, Secret: "not-the-balancers", BootID: "boot-w",
		HeartbeatInterval: 30 * time.Second})
	waitFor(t, "a refused heartbeat", func() bool { return s.reg.beats.Load() >= 1 })
	msg := notReady(t, s, "never registered with the balancer: the balancer at "+fb.srv.URL+
		" refused this relay's credential (unauthorized): relay and balancer must share one SECRET")
	for _, secret := range []string{"not-the-balancers", testSecret} {
		if strings.Contains(msg, secret) {
			t.Fatalf("/ready shows a secret: %q", msg)
		}
	}
	if resp, err := http.Get(s.HTTPURL() + "/ping"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/ping of a relay that is not ready: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestReadyStandaloneAndUnreachable: a relay without a balancer is ready
// (there is nothing to register with); one whose balancer nothing answers
// for is not, and names the address it tried.
func TestReadyStandaloneAndUnreachable(t *testing.T) {
	s := startRelay(t, Options{BootID: "boot-s"})
	code, body := getReady(t, s)
	var r wire.Readiness
	if code != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil || !r.Ready || !r.Standalone {
		t.Fatalf("standalone /ready: %d %s", code, body)
	}
	if resp, err := http.Post(s.HTTPURL()+wire.PathReady, "text/plain", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /ready: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	fake := clock.NewFake(time.Unix(2_000_000, 0))
	u := startRelay(t, Options{BalancerURL: "http://127.0.0.1:9", Clock: fake, BootID: "boot-u", HeartbeatInterval: 30 * time.Second})
	waitFor(t, "a failed heartbeat", func() bool { return u.reg.beats.Load() >= 1 })
	notReady(t, u, "never registered with the balancer: the balancer at http://127.0.0.1:9 is unreachable")
}
