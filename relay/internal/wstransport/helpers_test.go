package wstransport

import (
	"cmp"
	"flag"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

func TestMain(m *testing.M) {
	lockrank.EnableForTests()
	goleak.VerifyTestMain(m)
}

func testLogger() *slog.Logger {
	if os.Getenv("RELAY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// rig is a routing core and this transport behind a loopback HTTP server
// that upgrades every request: a relay without its server around it.
type rig struct {
	tb       testing.TB
	core     *core.Core
	tr       *Transport
	reg      *prometheus.Registry
	srv      *httptest.Server
	sessions sync.WaitGroup
}

// rigConfig adjusts what a rig is built with.
type rigConfig struct {
	clock      clock.Clock
	closeGrace time.Duration
	slow       time.Duration // the core's slow-receiver timeout
	// maxPending, maxPendingPerSource: the pending pool's bounds (0:
	// 4,096 and 64); messageTimeout: the stall bound (0: none).
	maxPending, maxPendingPerSource int
	messageTimeout                  time.Duration
}

// newRig starts a rig; it ends with the test, once every connection is
// gone and the core is consistent.
func newRig(tb testing.TB, rc rigConfig) *rig {
	tb.Helper()
	r := &rig{tb: tb, reg: prometheus.NewRegistry()}
	var err error
	r.core, err = core.New(core.Config{Clock: rc.clock, Log: testLogger(), Metrics: r.reg, SlowReceiverTimeout: rc.slow})
	if err != nil {
		tb.Fatal(err)
	}
	t, err := New(Config{
		Core: r.core, Clock: rc.clock, Log: testLogger(), Metrics: r.reg, AuthTimeout: 10 * time.Second,
		CloseGrace: rc.closeGrace, MessageTimeout: rc.messageTimeout,
		MaxPending: cmp.Or(rc.maxPending, 4096), MaxPendingPerSource: cmp.Or(rc.maxPendingPerSource, 64),
		Admit: func() bool { r.sessions.Add(1); return true },
	})
	if err != nil {
		tb.Fatal(err)
	}
	r.tr = t
	r.srv = httptest.NewServer(wire.Common(wire.Handler(func(w http.ResponseWriter, req *http.Request) error {
		return t.Accept(w, req, Peer{Ended: r.sessions.Done})
	})))
	tb.Cleanup(func() {
		testutil.Eventually(tb, 5*time.Second, "every connection gone", func() bool { return r.core.NumConns() == 0 })
		if err := r.core.ConsistencyCheck(); err != nil {
			tb.Errorf("consistency: %v", err)
		}
		r.sessions.Wait()
		r.srv.Close()
		r.core.Wait()
	})
	return r
}

// url is the rig's WebSocket URL.
func (r *rig) url() string { return "ws" + strings.TrimPrefix(r.srv.URL, "http") }

// allocate creates room name and returns its host and client secrets.
func (r *rig) allocate(name string) (hostSecret, clientSecret string) {
	r.tb.Helper()
	a, err := r.core.Allocate(name, "alloc-"+name)
	if err != nil {
		r.tb.Fatal(err)
	}
	return a.HostSecret, a.Pub.ClientSecret
}

// metric is the value of the rig's metric name with label=value.
func (r *rig) metric(name, label, value string) float64 {
	r.tb.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" && len(m.GetLabel()) == 0 || len(m.GetLabel()) > 0 && m.GetLabel()[0].GetName() == label && m.GetLabel()[0].GetValue() == value {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

// join connects to the rig and authenticates, failing the test unless
// accepted.
func (r *rig) join(room, secret string) *wstest.Peer {
	r.tb.Helper()
	p := wstest.Dial(r.tb, r.url())
	if got := p.Auth(room, secret); got != wire.Authenticated {
		r.tb.Fatalf("auth to %q: reply %d", room, got)
	}
	return p
}

func sendOne(target wire.ConnID, payload string) []byte {
	return wire.AppendSendOne(nil, target, []byte(payload))
}

func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testutil.Eventually(tb, 5*time.Second, what, cond)
}

func equal(a []byte, b string) bool { return string(a) == b }

// TestLockOrderIsChecked: this package's tests run with the lock-rank
// checker on (internal/lockrank), benchmarks aside.
func TestLockOrderIsChecked(t *testing.T) {
	if flag.Lookup("test.bench").Value.String() == "" && !lockrank.Enabled() {
		t.Fatal("the lock-rank checker is off")
	}
}
