package relay

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

const testSecret = "TEST-SECRET"

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

// startRelay starts a relay on loopback ephemeral ports. tweak may adjust
// the server before Start (unexported knobs).
func startRelay(tb testing.TB, opts Options, tweak ...func(*Server)) *Server {
	tb.Helper()
	if opts.Secret == "" {
		opts.Secret = testSecret
	}
	if opts.ListenHost == "" {
		opts.ListenHost = "127.0.0.1"
	}
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	for _, f := range tweak {
		f(s)
	}
	if err := s.Start(); err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() {
		// Test peers are closed by now (cleanups run last-in first-out):
		// wait for the relay to notice, then check it on a quiet state.
		waitFor(tb, "every connection gone", func() bool { return s.Stats().Connections == 0 })
		if err := s.ConsistencyCheck(); err != nil {
			tb.Errorf("consistency: %v", err)
		}
		_ = s.Close()
	})
	return s
}

// waitFor waits up to 5 s for cond (testutil.Eventually with this
// package's usual bound).
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testutil.Eventually(tb, 5*time.Second, what, cond)
}

// allocate calls the internal allocation endpoint.
func allocate(tb testing.TB, s *Server, name, allocID string) (wire.RelayAllocation, int, *wire.Error) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL()+wire.PathRelayAllocate, nil)
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	req.Header.Set(wire.HeaderName, name)
	req.Header.Set(wire.HeaderRegion, "test")
	if allocID != "" {
		req.Header.Set(wire.HeaderAllocationID, allocID)
	}
	resp, body := do(tb, req)
	var a wire.RelayAllocation
	if resp.StatusCode != http.StatusOK {
		return a, resp.StatusCode, wire.DecodeError(resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &a); err != nil {
		tb.Fatalf("decode allocation: %v", err)
	}
	return a, resp.StatusCode, nil
}

func mustAllocate(tb testing.TB, s *Server, name string) (hostSecret, clientSecret string) {
	tb.Helper()
	a, status, e := allocate(tb, s, name, "alloc-"+name)
	if status != http.StatusOK {
		tb.Fatalf("allocate %q: %d %v", name, status, e)
	}
	return a.Capability.Secret, a.Publication.ClientSecret
}

func do(tb testing.TB, req *http.Request) (*http.Response, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read body: %v", err)
	}
	return resp, body
}

// join connects and authenticates, failing the test unless accepted.
func join(tb testing.TB, s *Server, room, secret string) *wstest.Peer {
	tb.Helper()
	p := wstest.Dial(tb, s.WSURL())
	if got := p.Auth(room, secret); got != wire.Authenticated {
		tb.Fatalf("auth to %q: reply %d", room, got)
	}
	return p
}

func sendOne(target wire.ConnID, payload string) []byte {
	return wire.AppendSendOne(nil, target, []byte(payload))
}

func idOf(b []byte) wire.ConnID { return wire.ConnID(binary.LittleEndian.Uint32(b)) }

func equal(a []byte, b string) bool { return bytes.Equal(a, []byte(b)) }

// counterValue reads a Prometheus counter or gauge.
func counterValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// udpPortOf is the UDP port s bound (and advertises).
func udpPortOf(tb testing.TB, s *Server) int {
	tb.Helper()
	ap, err := netip.ParseAddrPort(s.UDPAddr())
	if err != nil {
		tb.Fatalf("relay UDP address %q: %v", s.UDPAddr(), err)
	}
	return int(ap.Port())
}

// metricValue is the value of s's metric name with label=value (a
// counter or a gauge), as /metrics tells it; 0 when it was never counted.
func metricValue(tb testing.TB, s *Server, name, label, value string) float64 {
	tb.Helper()
	return metricIn(tb, s.gatherer, name, label, value)
}

// metricIn is metricValue of the metrics g gathers.
func metricIn(tb testing.TB, g prometheus.Gatherer, name, label, value string) float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" && len(m.GetLabel()) == 0 { // a series without labels
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if m.Counter != nil {
						return m.Counter.GetValue()
					}
					return m.Gauge.GetValue()
				}
			}
		}
	}
	return 0
}

// disconnects is how many connections of s ended for reason.
func disconnects(tb testing.TB, s *Server, reason core.Reason) float64 {
	tb.Helper()
	return metricValue(tb, s, "purrfly_relay_disconnects_total", "reason", reason.String())
}

// drops is how many packets s dropped for reason.
func drops(tb testing.TB, s *Server, reason string) float64 {
	tb.Helper()
	return metricValue(tb, s, "purrfly_relay_dropped_packets_total", "reason", reason)
}

// TestLockOrderIsChecked: this package's tests run with the lock-rank
// checker on (internal/lockrank), benchmarks aside.
func TestLockOrderIsChecked(t *testing.T) {
	if flag.Lookup("test.bench").Value.String() == "" && !lockrank.Enabled() {
		t.Fatal("the lock-rank checker is off")
	}
}
