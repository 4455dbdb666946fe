package balancer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// guardLog is a slog.Handler that keeps every record.
type guardLog struct {
	mu      sync.Mutex
	recs    []slog.Record
	changed chan struct{} // signalled (without blocking) on every record
}

func newGuardLog() *guardLog { return &guardLog{changed: make(chan struct{}, 1)} }

func (g *guardLog) Enabled(context.Context, slog.Level) bool { return true }
func (g *guardLog) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *guardLog) WithGroup(string) slog.Handler            { return g }
func (g *guardLog) Handle(_ context.Context, r slog.Record) error {
	g.mu.Lock()
	g.recs = append(g.recs, r.Clone())
	g.mu.Unlock()
	select {
	case g.changed <- struct{}{}:
	default:
	}
	return nil
}

func (g *guardLog) has(level slog.Level, msg string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.recs {
		if r.Level == level && r.Message == msg {
			return true
		}
	}
	return false
}

// wait blocks until a record of level and msg arrives (5 s at most).
func (g *guardLog) wait(t testing.TB, level slog.Level, msg string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for !g.has(level, msg) {
		select {
		case <-g.changed:
		case <-timeout:
			t.Fatalf("no %s record %q", level, msg)
		}
	}
}

// TestLogsGoToTheConfiguredLogger: the balancer logs to Options.Logger
// when one is given (slog.Default only when none is).
func TestLogsGoToTheConfiguredLogger(t *testing.T) {
	g := newGuardLog()
	h := newHarness(t, func(o *Options) { o.Logger = slog.New(g) })
	if !g.has(slog.LevelInfo, "balancer listening") {
		t.Fatal("Start did not log to the configured logger")
	}
	newFakeRelay(t, "eu").register(h)
	if !g.has(slog.LevelInfo, "relay registered") {
		t.Fatal("a registration was not logged to the configured logger")
	}
}

// TestServeFailureIsLogged: when the listener fails under the server (not a
// shutdown), the balancer logs an error, so an operator sees why it stopped
// answering.
func TestServeFailureIsLogged(t *testing.T) {
	g := newGuardLog()
	h := newHarness(t, func(o *Options) { o.Logger = slog.New(g) })
	h.s.mu.Lock()
	ln := h.s.ln
	h.s.mu.Unlock()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	g.wait(t, slog.LevelError, "balancer server stopped")
}

// TestShutdownDoesNotLogAnError: an ordinary shutdown is not reported as a
// server failure.
func TestShutdownDoesNotLogAnError(t *testing.T) {
	g := newGuardLog()
	h := newHarness(t, func(o *Options) { o.Logger = slog.New(g) })
	if err := h.s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g.has(slog.LevelError, "balancer server stopped") {
		t.Fatal("a shutdown was logged as a server failure")
	}
}

// TestURLNamesAReachableHost: URL is http://127.0.0.1:port when the
// balancer listens on every interface (ListenHost empty or unspecified),
// else http://ListenHost:port.
func TestURLNamesAReachableHost(t *testing.T) {
	for listen, want := range map[string]string{
		"":          "http://127.0.0.1:0",
		"0.0.0.0":   "http://127.0.0.1:0",
		"::":        "http://127.0.0.1:0",
		"127.0.0.1": "http://127.0.0.1:0",
		"::1":       "http://[::1]:0",
		"localhost": "http://localhost:0",
	} {
		s, err := New(Options{Secret: testSecret, ListenHost: listen})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.URL(); got != want {
			t.Errorf("ListenHost %q: URL %s, want %s", listen, got, want)
		}
	}
}

// TestShutdownPastItsDeadline: Shutdown lets in-flight requests finish
// until its context ends; then it drops them and reports the context's
// error.
func TestShutdownPastItsDeadline(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	hold := make(chan struct{})
	r.set(func(f *fakeRelay) { f.hold = hold })
	t.Cleanup(func() { close(hold) }) // before the relay's own cleanup
	done := make(chan error, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, h.s.URL()+"/allocate_ws", nil)
		if err != nil {
			done <- err
			return
		}
		req.Header.Set(wire.HeaderName, "room")
		req.Header.Set(wire.HeaderRegion, "eu")
		req.Header.Set(wire.HeaderAllocationID, "play-1")
		resp, err := h.client.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	waitFor(t, "the allocation to reach the relay", func() bool { return r.allocCalls.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown past its deadline with a request in flight: %v, want context.Canceled", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the in-flight request was answered, want it dropped")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight request was not dropped")
	}
}

// TestShutdownClosesOnlyItsOwnClient: Shutdown closes the idle relay
// connections of the HTTP client the balancer made, and leaves those of a
// client it was given (Options.HTTPClient) to its owner.
func TestShutdownClosesOnlyItsOwnClient(t *testing.T) {
	t.Run("given", func(t *testing.T) {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		h := newHarness(t, func(o *Options) { o.HTTPClient = client })
		r := newFakeRelay(t, "eu")
		r.register(h) // its /ping proof goes through client
		if n := r.conns.Load(); n != 1 {
			t.Fatalf("%d connections to the relay after the proof", n)
		}
		if err := h.s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		resp, err := client.Get(r.info.Endpoint + "/ping")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := r.conns.Load(); n != 1 {
			t.Fatal("Shutdown closed the idle connections of a client it was given")
		}
	})
	t.Run("own", func(t *testing.T) {
		h := newHarness(t, nil)
		r := newFakeRelay(t, "eu")
		closed := make(chan struct{}, 8)
		front := httptest.NewUnstartedServer(http.HandlerFunc(r.handlePing))
		front.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				closed <- struct{}{}
			}
		}
		front.Start()
		t.Cleanup(front.Close)
		r.set(func(f *fakeRelay) { f.info.Endpoint = front.URL })
		r.register(h) // its /ping proof leaves an idle connection
		select {
		case <-closed:
			t.Fatal("the proof's connection closed before Shutdown")
		default:
		}
		if err := h.s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Shutdown left the idle relay connection of its own client open")
		}
	})
}
