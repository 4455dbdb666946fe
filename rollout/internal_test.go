package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/testutil"
)

func TestNormalizeRef(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"purrfly:v2", "registry.fly.io/purrfly:v2", true},
		{"registry.fly.io/app:deployment-1", "registry.fly.io/app:deployment-1@sha256:abc", true},
		{"app", "registry.fly.io/app:latest", true},
		{"purrfly:v2", "registry.fly.io/purrfly:v1", false},
		{"ghcr.io/x/app:1", "registry.fly.io/x/app:1", false},
		{"localhost:5000/app:1", "localhost:5000/app:1", true},
	} {
		if got := sameImageRef(c.a, c.b); got != c.same {
			t.Errorf("sameImageRef(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

// The limiter lets a burst through, then one request per rate per key;
// other keys are not held up.
func TestLimiter(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	l := newLimiter(100*time.Millisecond, 3)
	l.clock = clk
	ctx := context.Background()
	start := clk.Now()
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 5; i++ {
			if err := l.wait(ctx, "update/m1"); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// The clock moves on in steps of 10ms, each once the limiter waits on
	// it, until the five requests are through.
	var finished bool
	for !finished {
		testutil.Eventually(t, 5*time.Second, "the limiter to wait or let the requests through", func() bool {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				finished = true
				return true
			default:
				return clk.Waiters() == 1
			}
		})
		if !finished {
			clk.Advance(10 * time.Millisecond)
		}
	}
	if el := clk.Now().Sub(start); el < 180*time.Millisecond || el > 2*time.Second {
		t.Errorf("5 requests with burst 3 at 10/s took %s, want about 200ms", el)
	}
	start = clk.Now()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a limiter that waits never returns on its own
	defer cancel()
	if err := l.wait(wctx, "update/m2"); err != nil || clk.Now().Sub(start) > 50*time.Millisecond {
		t.Errorf("another key waited %s (%v)", clk.Now().Sub(start), err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for i := 0; i < 3; i++ {
		_ = l.wait(ctx, "x")
	}
	if err := l.wait(cctx, "x"); err == nil {
		t.Errorf("wait ignored a cancelled context")
	}
}

// A replacement's stopping/stopped moments (the old process's requested
// exit) are not a failure; an unrequested exit after the update is.
func TestExitReason(t *testing.T) {
	exit := func(code int, requested bool) *fly.MachineEvent {
		return &fly.MachineEvent{Type: "exit", Request: &fly.MachineRequest{ExitEvent: &fly.MachineExitEvent{ExitCode: code, RequestedStop: requested}}}
	}
	update := &fly.MachineEvent{Type: "update"}
	for _, c := range []struct {
		state  string
		events []*fly.MachineEvent
		want   string
	}{
		{"stopping", []*fly.MachineEvent{update}, ""},
		{"stopped", []*fly.MachineEvent{exit(0, true), update}, ""},
		{"started", []*fly.MachineEvent{exit(1, false), update}, ""},
		{"stopped", []*fly.MachineEvent{exit(1, false), {Type: "start"}, exit(0, true), update}, "machine is stopped: its process exited with code 1"},
		{"stopped", []*fly.MachineEvent{update, exit(1, false)}, ""}, // an exit before the update
		{"destroyed", nil, "machine is destroyed"},
	} {
		if got := exitReason(&fly.Machine{State: c.state, Events: c.events}); got != c.want {
			t.Errorf("%s %d events: %q, want %q", c.state, len(c.events), got, c.want)
		}
	}
}

// TestReleaseOfAnExpiredLease: releasing a lease the Machines API no
// longer has (it expired: 404) is no failure; any other refusal is
// reported, never swallowed.
func TestReleaseOfAnExpiredLease(t *testing.T) {
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete || !strings.HasSuffix(r.URL.Path, "/machines/m1/lease") {
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write([]byte(`{"error":"lease"}`))
	}))
	defer srv.Close()
	api, err := newMachinesAPI(t.Context(), srv.URL, "token", nil, 0, 0, time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	release := func(code int) error {
		status.Store(int32(code))
		done := make(chan struct{})
		close(done) // no refresher
		l := &lease{api: api, app: "a", id: "m1", ttl: 10, nonce: "n", stop: make(chan struct{}), done: done}
		return l.release()
	}
	if err := release(http.StatusOK); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := release(http.StatusNotFound); err != nil {
		t.Fatalf("release of an expired lease: %v, want nil", err)
	}
	if err := release(http.StatusBadRequest); err == nil {
		t.Fatal("a refused release was swallowed")
	}
}

// TestLimiterWaitsForTheRestOfAToken: a caller that finds a quarter of a
// token waits exactly for the other three quarters.
func TestLimiterWaitsForTheRestOfAToken(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	l := newLimiter(200*time.Millisecond, 1)
	l.clock = clk
	ctx := context.Background()
	if err := l.wait(ctx, "k"); err != nil { // the only token
		t.Fatal(err)
	}
	clk.Advance(50 * time.Millisecond) // a quarter of the next one
	done := make(chan error, 1)
	go func() { done <- l.wait(ctx, "k") }()
	for clk.Waiters() == 0 {
		select {
		case err := <-done:
			t.Fatalf("took a token that was not there (%v)", err)
		default:
			runtime.Gosched()
		}
	}
	clk.Advance(150*time.Millisecond - time.Nanosecond)
	if clk.Waiters() != 1 { // a fired timer leaves at once
		t.Fatal("the wait ended before the token was whole")
	}
	clk.Advance(time.Nanosecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second): // real time: only a bound on a broken limiter
		t.Fatal("still waiting once the token was whole")
	}
}

// TestMachinesAPIBaseWithAPath: FLY_FLAPS_BASE_URL may carry a path
// (flaps builds its URLs under it); requests still reach the configured
// Machines API at its own paths.
func TestMachinesAPIBaseWithAPath(t *testing.T) {
	t.Setenv("FLY_FLAPS_BASE_URL", "http://flaps.invalid/some/prefix")
	paths := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"m1","state":"started"}`))
	}))
	defer srv.Close()
	api, err := newMachinesAPI(t.Context(), srv.URL, "token", nil, 0, 0, time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := api.get(t.Context(), "a", "m1"); err != nil || m.ID != "m1" {
		t.Fatalf("get: %v %v", m, err)
	}
	if p := <-paths; p != "/v1/apps/a/machines/m1" {
		t.Fatalf("the Machines API saw %s", p)
	}
}

// TestCallRetriesWithDoublingBackoff: a retryable failure is retried
// after the base delay, then twice that, up to the number of tries, and
// the last failure is returned.
func TestCallRetriesWithDoublingBackoff(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	lim := newLimiter(time.Millisecond, 100)
	lim.clock = clk
	base := 100 * time.Millisecond
	api := &machinesAPI{limit: lim, base: base, tries: 3, clock: clk}
	var tries atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- api.call(t.Context(), "get", "m1", time.Second, func(context.Context) error {
			tries.Add(1)
			return errors.New("connection reset") // a transport error: retryable
		})
	}()
	until := func(what string, cond func() bool) {
		t.Helper()
		if !testutil.Poll(5*time.Second, cond) { // only a bound on a broken retry loop
			t.Fatalf("timed out waiting for %s (%d tries)", what, tries.Load())
		}
	}
	for i, d := range []time.Duration{base, 2 * base} {
		until("the retry delay to start", func() bool { return tries.Load() == int32(i+1) && clk.Waiters() == 1 })
		clk.Advance(d - time.Nanosecond)
		if n := clk.Waiters(); n != 1 { // a fired timer leaves at once
			t.Fatalf("retry %d was due before its %s delay", i+1, d)
		}
		clk.Advance(time.Nanosecond)
	}
	until("the third try", func() bool { return tries.Load() == 3 })
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("after 3 tries: %v, want the last failure", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still retrying after %d tries", tries.Load())
	}
	if n := tries.Load(); n != 3 {
		t.Fatalf("%d tries, want 3", n)
	}
}

// TestUpdateTriesAsConfigured: an update the Machines API keeps failing
// is sent exactly `tries` times (each retry after reading the machine
// back: it did not change), then reported.
func TestUpdateTriesAsConfigured(t *testing.T) {
	var updates atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			updates.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":"try again"}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"m1","state":"started","instance_id":"v1","config":{"image":"old"}}`))
	}))
	defer srv.Close()
	api, err := newMachinesAPI(t.Context(), srv.URL, "token", nil, 0, 0, time.Millisecond, 3)
	if err != nil {
		t.Fatal(err)
	}
	m := &fly.Machine{ID: "m1", Version: "v1", Config: &fly.MachineConfig{Image: "old"}}
	if _, err := api.update(t.Context(), "a", m, &fly.MachineConfig{Image: "new"}, "nonce"); err == nil {
		t.Fatal("an update that always fails succeeded")
	}
	if n := updates.Load(); n != 3 {
		t.Fatalf("%d update requests, want 3", n)
	}
}

// TestMachinesAPIDefaults: zero settings get the defaults (a retry delay
// of zero would hammer the API), and the Machines API's 502/503 to a
// change become 500s for flaps (which would retry them on its own, past
// our accounting), while reads keep their status.
func TestMachinesAPIDefaults(t *testing.T) {
	api, err := newMachinesAPI(t.Context(), "http://127.0.0.1:9", "token", nil, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if api.base != defaultRetryBase || api.tries != defaultAPITries || api.limit.rate != defaultAPIRate*21/20 || api.limit.burst != defaultAPIBurst {
		t.Fatalf("defaults: base %v tries %d rate %v burst %v", api.base, api.tries, api.limit.rate, api.limit.burst)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rb := &rebase{from: &url.URL{Scheme: "https", Host: "api.machines.dev"}, to: u, next: http.DefaultTransport}
	for method, want := range map[string]int{http.MethodGet: 503, http.MethodPost: 500} {
		req, _ := http.NewRequest(method, "https://api.machines.dev/v1/apps/a/machines", nil)
		resp, err := rb.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s answered 503: flaps sees %d, want %d", method, resp.StatusCode, want)
		}
	}
}

// TestPingMachineProvesTheMachine: /ping through the proxy proves a boot
// only when it answers for the machine asked for and carries a boot id.
func TestPingMachineProvesTheMachine(t *testing.T) {
	var answer atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer.Load().(string)))
	}))
	defer srv.Close()
	for body, ok := range map[string]bool{
		`{"role":"relay","bootId":"b1","machineId":"m1"}`:    true,
		`{"role":"relay","bootId":"b1"}`:                     true, // a process that does not know its machine id
		`{"role":"relay","bootId":"b1","machineId":"other"}`: false,
		`{"role":"relay","bootId":"","machineId":"m1"}`:      false,
	} {
		answer.Store(body)
		if _, err := pingMachine(t.Context(), srv.Client(), srv.URL, "m1"); (err == nil) != ok {
			t.Errorf("/ping %s: err %v, want ok %v", body, err, ok)
		}
	}
}

// TestOthersUpChecksOnlyOtherRelays: before a relay goes down every other
// relay must answer /ping; the balancer and the relay itself do not count.
func TestOthersUpChecksOnlyOtherRelays(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"role":"relay","bootId":"b"}`))
	}))
	defer up.Close()
	const dead = "http://127.0.0.1:9"
	tg := func(role, name, url string) *target {
		return &target{role: role, app: App{Name: name, URL: url}, m: &fly.Machine{ID: name + "-m"}}
	}
	r := &run{hc: up.Client()}
	a, b, bal := tg(RoleRelay, "a", up.URL), tg(RoleRelay, "b", dead), tg(RoleBalancer, "bal", dead)
	if err := r.othersUp(t.Context(), b, []*target{a, b, bal}); err != nil {
		t.Errorf("updating the dead relay itself with the other up: %v", err)
	}
	if err := r.othersUp(t.Context(), a, []*target{a, b, bal}); err == nil || !strings.Contains(err.Error(), "b-m") {
		t.Errorf("updating a while relay b is down: %v, want a refusal naming b", err)
	}
}

// TestStepCause: a step's error says what stopped the step (lease lost,
// phase deadline) once, before what the step was doing.
func TestStepCause(t *testing.T) {
	boom := errors.New("GET /ping: connection refused")
	if got := stepCause(t.Context(), boom); got != boom {
		t.Errorf("no cause: %v", got)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("lost the machine lease")
	cancel(cause)
	if got := stepCause(ctx, boom); got.Error() != "lost the machine lease: GET /ping: connection refused" || !errors.Is(got, cause) || !errors.Is(got, boom) {
		t.Errorf("with a cause: %v", got)
	}
	wrapped := fmt.Errorf("wait: %w", cause)
	if got := stepCause(ctx, wrapped); got != wrapped {
		t.Errorf("an error that already carries the cause: %v", got)
	}
}

// TestWaitStartedPollsAndNoticesAnExit: "not yet" from /wait (408) is
// waited through, reading the machine between polls; a machine whose
// process exited after its update fails the wait at once with why.
func TestWaitStartedPollsAndNoticesAnExit(t *testing.T) {
	var waits atomic.Int32
	var exited atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/wait") {
			if waits.Add(1) < 3 || exited.Load() {
				w.WriteHeader(http.StatusRequestTimeout)
				_, _ = w.Write([]byte(`{"error":"deadline_exceeded"}`))
				return
			}
			_, _ = w.Write([]byte(`{"ok":true}`))
			return
		}
		if exited.Load() {
			_, _ = w.Write([]byte(`{"id":"m1","state":"stopped","version":"v2","events":[` +
				`{"type":"exit","status":"stopped","request":{"exit_event":{"exit_code":1,"requested_stop":false}}},{"type":"update"}]}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"m1","state":"starting","version":"v2"}`))
	}))
	defer srv.Close()
	api, err := newMachinesAPI(t.Context(), srv.URL, "token", nil, time.Millisecond, 100, time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{api: api, log: slog.New(slog.DiscardHandler), t: Timeouts{Poll: Duration{Duration: 10 * time.Millisecond}}}
	tg := &target{app: App{Name: "a"}, m: &fly.Machine{ID: "m1"}, res: &MachineResult{}}
	if err := r.waitStarted(t.Context(), tg, "v2"); err != nil || waits.Load() != 3 {
		t.Fatalf("waitStarted: %v after %d waits, want success on the third", err, waits.Load())
	}
	exited.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := r.waitStarted(ctx, tg, "v2"); err == nil || !strings.Contains(err.Error(), "exited with code 1") {
		t.Fatalf("a machine that exited: %v, want its exit reported", err)
	}
}

// TestOrNone: an empty boot id reads "none" in messages.
func TestOrNone(t *testing.T) {
	if orNone("") != "none" || orNone("b1") != "b1" {
		t.Fatalf("orNone: %q %q", orNone(""), orNone("b1"))
	}
}

// TestHealthyKeepsTheLastRealReason: when the wait runs out in the middle
// of a check, the failure gives the last reason a finished check found
// (here: the boot is not registered), not the cut-short check's.
func TestHealthyKeepsTheLastRealReason(t *testing.T) {
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/ready" {
			_, _ = w.Write([]byte(`{"ready":true,"bootId":"B"}`))
			return
		}
		_, _ = w.Write([]byte(`{"role":"relay","bootId":"B","machineId":"m1"}`))
	}))
	defer relay.Close()
	bal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"instances":[]}`))
	}))
	defer bal.Close()
	var gets atomic.Int32
	machines := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gets.Add(1) > 1 {
			<-r.Context().Done() // every later read is cut short by the deadline
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"m1","state":"started","version":"v1","config":{"image":"x"}}`))
	}))
	defer machines.Close()
	api, err := newMachinesAPI(t.Context(), machines.URL, "token", nil, time.Millisecond, 100, time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	ms := func(d time.Duration) Duration { return Duration{Duration: d} }
	r := &run{api: api, hc: relay.Client(), bal: client.NewBalancer(bal.URL), secret: "s", log: slog.New(slog.DiscardHandler),
		t: Timeouts{Poll: ms(10 * time.Millisecond), MinHealthy: ms(20 * time.Millisecond)}}
	tg := &target{role: RoleRelay, app: App{Name: "a", URL: relay.URL}, m: &fly.Machine{ID: "m1"}, res: &MachineResult{}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = r.healthy(ctx, tg, "v1", "B")
	if err == nil || !strings.Contains(err.Error(), "boot B is not registered live with the balancer") {
		t.Fatalf("healthy: %v, want the last real reason", err)
	}
	// It did stay healthy: what it lacked was readiness, and the failure
	// says so rather than contradicting the wait's own progress lines.
	if !strings.Contains(err.Error(), "stayed healthy for 20ms but was not ready yet") || strings.Contains(err.Error(), "did not stay healthy") {
		t.Fatalf("healthy: %v, want it to say the boot stayed healthy and was not ready", err)
	}
}

// TestProgressNamesTheBootBeingVerified: once the new boot is found, the
// machine's progress events carry it in Boot (the one they talk about),
// and the boot it replaces in OldBoot.
func TestProgressNamesTheBootBeingVerified(t *testing.T) {
	var got []Event
	r := &run{log: slog.New(slog.DiscardHandler), opts: Options{Observer: func(ev Event) { got = append(got, ev) }}}
	tg := &target{app: App{Name: "a"}, m: &fly.Machine{ID: "m1", Region: "ams"}, res: &MachineResult{}}
	r.emit(Event{App: "a", Machine: "m1", Status: StatusUpdating, Boot: "old", Message: "updating"})
	r.progress(tg, WaitBoot, time.Time{}, "waiting for a new boot")
	r.provedBoot(tg, "old", "new")
	r.progress(tg, WaitHealthy, time.Time{}, "boot new must answer /ping")
	if len(got) != 3 || got[1].Boot != "old" || got[2].Boot != "new" || got[2].OldBoot != "old" || got[2].Status != StatusUpdating {
		t.Fatalf("events %+v: want the wait for a boot under the old one, then the new boot with its old one", got)
	}
}

// TestMachinesAPIErrorsNameTheURLGiven: a Machines API that does not
// answer is retried with a notice per retry (the run's context carries
// it; the lease refresher's does not), and the final error names the URL
// the operator gave, not flaps' own default base that was never dialled.
func TestMachinesAPIErrorsNameTheURLGiven(t *testing.T) {
	t.Setenv("FLY_FLAPS_BASE_URL", "")
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close() // nothing answers there now
	api, err := newMachinesAPI(t.Context(), base, "token", nil, time.Millisecond, 100, time.Millisecond, 3)
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	ctx := withRetryNotice(t.Context(), func(action string, try, tries int, _ time.Duration, err error) {
		notices = append(notices, fmt.Sprintf("%s %d/%d %v", action, try, tries, err))
	})
	_, err = api.list(ctx, "a")
	if err == nil || !strings.Contains(err.Error(), base+"/v1/apps/a/machines") || strings.Contains(err.Error(), "api.machines.dev") {
		t.Fatalf("list: %v, want the error to name %s", err, base)
	}
	if len(notices) != 2 || !strings.HasPrefix(notices[0], "list 1/3 ") || !strings.Contains(notices[0], base) {
		t.Fatalf("notices %q, want one per retry naming %s", notices, base)
	}
	if _, err := api.list(t.Context(), "a"); err == nil {
		t.Fatal("list succeeded against nothing")
	}
}
