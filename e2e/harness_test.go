package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/devstack"
	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/relay"
	"github.com/purrfly/purrfly/wire"
)

func TestMain(m *testing.M) {
	// After answering 431 to an oversized header block, net/http's server
	// lingers 500 ms in closeWriteAndWait (its RST-avoidance delay) on a
	// goroutine Server.Close does not wait for. It is the standard
	// library's, bounded, and not ours to leak.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("net/http.(*conn).closeWriteAndWait"))
}

// testSecret is the shared SECRET of every stack here: distinctive, so a
// leak into any answer or error is easy to spot.
const testSecret = "e2e-Shared-S3cret-never-echo"

// Short intervals so that "within one heartbeat" is fast to observe.
const (
	heartbeat      = 150 * time.Millisecond
	healthInterval = 200 * time.Millisecond
	stepTimeout    = 10 * time.Second
)

var discard = slog.New(slog.DiscardHandler)

// tctx is a context bounded by stepTimeout and the test's life.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	t.Cleanup(cancel)
	return ctx
}

// stack is a balancer and its relays, started by this package.
type stack struct {
	t      testing.TB
	bal    *balancer.Server
	relays []*relay.Server
	api    *client.Balancer
}

// startDev boots devstack with short intervals and one relay per region.
func startDev(t testing.TB, mod func(*devstack.Options), regions ...string) *stack {
	t.Helper()
	if len(regions) == 0 {
		regions = []string{"eu", "us"}
	}
	opts := devstack.Options{
		Regions:           regions,
		Secret:            testSecret,
		HeartbeatInterval: heartbeat,
		HealthInterval:    healthInterval,
		DrainTimeout:      time.Second,
		Logger:            discard,
		// Tests allocate in bursts from one address; limits are tested
		// where they are set.
		AllocateRate:      limit.Rate{Every: -1},
		JoinRate:          limit.Rate{Every: -1},
		MaxRoomsPerSource: -1,
	}
	if mod != nil {
		mod(&opts)
	}
	st, err := devstack.Start(tctx(t), opts)
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &stack{t: t, bal: st.Balancer, relays: st.Relays, api: newAPI(t, st.Balancer.URL())}
}

// newBalancer builds and starts a balancer on 127.0.0.1:port (0: any).
func newBalancer(t testing.TB, port int, mod func(*balancer.Options)) *balancer.Server {
	t.Helper()
	opts := balancer.Options{
		Secret:         testSecret,
		ListenHost:     "127.0.0.1",
		Port:           port,
		Region:         "local",
		Version:        "e2e",
		HealthInterval: healthInterval,
		Logger:         discard,
	}
	if mod != nil {
		mod(&opts)
	}
	b, err := balancer.New(opts)
	if err != nil {
		t.Fatalf("balancer.New: %v", err)
	}
	// A port just released may take a moment to be bindable again.
	var startErr error
	testutil.Eventually(t, 5*time.Second, "the balancer to bind", func() bool {
		startErr = b.Start()
		return startErr == nil || !strings.Contains(startErr.Error(), "address already in use")
	})
	if startErr != nil {
		t.Fatalf("balancer.Start: %v", startErr)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// newRelay builds and starts a relay registered with balancerURL.
func newRelay(t testing.TB, balancerURL, region string, mod func(*relay.Options)) *relay.Server {
	t.Helper()
	opts := relay.Options{
		Secret:            testSecret,
		BalancerURL:       balancerURL,
		ListenHost:        "127.0.0.1",
		PublicHost:        "127.0.0.1",
		Region:            region,
		HeartbeatInterval: heartbeat,
		DrainTimeout:      time.Second,
		Version:           "e2e",
		Logger:            discard,
	}
	if mod != nil {
		mod(&opts)
	}
	r, err := relay.New(opts)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	var startErr error
	testutil.Eventually(t, 5*time.Second, "the relay to bind", func() bool {
		startErr = r.Start()
		return startErr == nil || !strings.Contains(startErr.Error(), "address already in use")
	})
	if startErr != nil {
		t.Fatalf("relay.Start: %v", startErr)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// waitRegistered waits until the balancer's admin list holds every boot.
func waitRegistered(t testing.TB, api *client.Balancer, boots ...string) {
	t.Helper()
	testutil.Eventually(t, stepTimeout, "relays "+strings.Join(boots, ",")+" to register", func() bool {
		list, err := api.Instances(t.Context(), testSecret)
		if err != nil {
			return false
		}
		have := map[string]bool{}
		for _, in := range list {
			have[in.BootID] = true
		}
		for _, b := range boots {
			if !have[b] {
				return false
			}
		}
		return true
	})
}

// newAPI returns a client.Balancer with its own HTTP transport (closed at
// cleanup) that fails the test if any answer carries the shared SECRET.
func newAPI(t testing.TB, baseURL string) *client.Balancer {
	return &client.Balancer{BaseURL: baseURL, HTTP: leakCheckingClient(t), Timeout: stepTimeout}
}

func leakCheckingClient(t testing.TB) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: leakCheck{t: t, next: tr}, Timeout: stepTimeout}
}

// leakCheck reads every answer and fails the test if it holds the SECRET.
type leakCheck struct {
	t    testing.TB
	next http.RoundTripper
}

func (l leakCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		if strings.Contains(err.Error(), testSecret) {
			l.t.Errorf("transport error carries the shared secret: %v", err)
		}
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	checkNoSecret(l.t, req.Method+" "+req.URL.Path, resp.Header, body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func checkNoSecret(t testing.TB, what string, h http.Header, body []byte) {
	t.Helper()
	if bytes.Contains(body, []byte(testSecret)) {
		t.Errorf("%s: answer body carries the shared secret: %.200s", what, body)
	}
	for k, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, testSecret) {
				t.Errorf("%s: answer header %s carries the shared secret", what, k)
			}
		}
	}
}

// answer is a raw HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// wireErr decodes the body as a purrfly error, failing the test if it is
// not exactly {"code","error","retryable"}.
func (a answer) wireErr(t testing.TB) *wire.Error {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("error answer %d is not JSON: %.200s", a.status, a.body)
	}
	if _, ok := m["code"].(string); !ok || len(m) != 3 {
		t.Fatalf("error answer %d is not {code,error,retryable}: %s", a.status, a.body)
	}
	if _, ok := m["error"].(string); !ok {
		t.Fatalf("error answer %d has no message: %s", a.status, a.body)
	}
	if _, ok := m["retryable"].(bool); !ok {
		t.Fatalf("error answer %d has no retryable flag: %s", a.status, a.body)
	}
	return wire.DecodeError(a.status, a.body)
}

// do sends one raw HTTP request (headers written with their names as given)
// and returns the whole answer; it checks that no answer carries the SECRET.
func do(t testing.TB, method, rawURL string, headers map[string]string, body []byte) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(tctx(t), method, rawURL, rd)
	if err != nil {
		t.Fatalf("build %s %s: %v", method, rawURL, err)
	}
	for k, v := range headers {
		req.Header[k] = []string{v}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: stepTimeout}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatalf("read %s %s: %v", method, rawURL, err)
	}
	checkNoSecret(t, method+" "+rawURL, resp.Header, b)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// internalPost sends a relay -> balancer request as a relay does, with the
// shared secret, and decodes a 2xx answer into out.
func internalPost(t testing.TB, balancerURL, path string, body []byte, out any) answer {
	t.Helper()
	a := do(t, http.MethodPost, strings.TrimRight(balancerURL, "/")+path, map[string]string{
		wire.HeaderInternalSecret:  testSecret,
		wire.HeaderInternalVersion: strconv.Itoa(wire.InternalProtocolVersion),
		"Content-Type":             "application/json",
	}, body)
	if out != nil && a.status/100 == 2 {
		if err := json.Unmarshal(a.body, out); err != nil {
			t.Fatalf("decode %s answer: %v: %s", path, err, a.body)
		}
	}
	return a
}
