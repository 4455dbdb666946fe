package balancer

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// peersOf is a Peers over fixed machines: id -> base URL (read at each
// call, so a test can bring a machine up later).
func peersOf(running func() []string, urls *sync.Map) Peers {
	return Peers{
		Running: func(context.Context) ([]string, error) { return running(), nil },
		URL: func(_ context.Context, id string) (string, error) {
			if u, ok := urls.Load(id); ok {
				return u.(string), nil
			}
			return "http://127.0.0.1:1", nil // nothing listens there
		},
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestStandbyTakesOverAndYields: a standby whose primary does not answer
// serves; a primary that boots asks it to yield and serves only once it
// has, so the two never serve at once; the yielded standby sends every
// request to the primary with Fly-Replay and says it yielded; a standby
// booting beside a primary that answers never serves.
func TestStandbyTakesOverAndYields(t *testing.T) {
	var urls sync.Map
	standby := newHarness(t, func(o *Options) {
		o.StandbyFor = "primary1"
		o.Peers = peersOf(func() []string { return []string{"primary1"} }, &urls)
	})
	waitFor(t, "the standby serves while its primary is gone", standby.s.Serving)
	if _, err := standby.allocate("room-a", "test", "a1"); err == nil || err.Code == wire.ErrBalancerStandby.Code {
		t.Fatalf("a serving standby answered an allocation with %v, want its own answer (no_relays)", err)
	}
	urls.Store("standby1", standby.s.URL())

	var both atomic.Bool
	var primary *harness
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // samples the two roles while the primary boots
		defer close(done)
		for !isClosed(stop) {
			mu.Lock()
			p := primary
			mu.Unlock()
			if p != nil && p.s.Serving() && standby.s.Serving() {
				both.Store(true)
			}
		}
	}()
	p := newHarness(t, func(o *Options) {
		o.Peers = peersOf(func() []string { return []string{"standby1"} }, &urls)
	})
	mu.Lock()
	primary = p
	mu.Unlock()
	waitFor(t, "the primary serves", p.s.Serving)
	close(stop)
	<-done
	if both.Load() {
		t.Error("the primary and the standby served at the same moment")
	}
	if standby.s.Serving() || !isClosed(standby.s.Yielded()) {
		t.Fatalf("after the primary's claim the standby serves=%v yielded=%v", standby.s.Serving(), isClosed(standby.s.Yielded()))
	}
	st, body, hdr := standby.do(http.MethodGet, "/servers", nil, nil)
	if st != http.StatusServiceUnavailable || hdr.Get(wire.HeaderFlyReplay) != "instance=primary1" || !contains(body, wire.ErrBalancerStandby.Code) {
		t.Errorf("a yielded standby answered /servers %d %q %s, want 503 balancer_standby with Fly-Replay to its primary", st, hdr.Get(wire.HeaderFlyReplay), body)
	}
	st, _, hdr = standby.do(http.MethodGet, "/servers", map[string]string{wire.HeaderFlyReplaySrc: "instance=x"}, nil)
	if st != http.StatusServiceUnavailable || hdr.Get(wire.HeaderFlyReplay) != "" {
		t.Errorf("a replayed request got Fly-Replay again (%d %q): the proxy would loop", st, hdr.Get(wire.HeaderFlyReplay))
	}
	if st, _, _ := standby.do(http.MethodGet, "/ping", nil, nil); st != http.StatusOK {
		t.Errorf("a yielded standby's /ping: %d, want 200 (its checks must pass until it exits)", st)
	}

	urls.Store("primary1", p.s.URL())
	late := newHarness(t, func(o *Options) {
		o.StandbyFor = "primary1"
		o.Peers = peersOf(func() []string { return []string{"primary1"} }, &urls)
	})
	waitFor(t, "a standby booting beside its primary yields", func() bool { return isClosed(late.s.Yielded()) })
	if late.s.Serving() {
		t.Error("a standby booting beside an answering primary serves")
	}
}

// TestStandbyYieldsWhenPrimaryReturns: a serving standby looks for its
// primary every PeerCheck (on the clock) and yields once it answers.
func TestStandbyYieldsWhenPrimaryReturns(t *testing.T) {
	var urls sync.Map
	standby := newHarness(t, func(o *Options) {
		o.StandbyFor = "primary1"
		o.Peers = peersOf(func() []string { return nil }, &urls)
	})
	waitFor(t, "the standby serves", standby.s.Serving)
	primary := newHarness(t, nil) // no Peers: serves at once, and never asks
	urls.Store("primary1", primary.s.URL())
	waitFor(t, "the standby yields within a PeerCheck of its primary's return", func() bool {
		standby.clk.Advance(DefaultPeerCheck)
		return isClosed(standby.s.Yielded())
	})
}

// TestSettleWindow: for SettleWindow after it starts serving, allocations
// (public and admin) answer 503 balancer_settling, retryable; then the
// balancer places as ever.
func TestSettleWindow(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SettleWindow = 2 * time.Second })
	_, err := h.allocate("room-a", "test", "a1")
	wantCode(t, err, wire.ErrBalancerSettling.Code)
	if !err.Retryable {
		t.Error("balancer_settling is not retryable")
	}
	if _, err := h.s.Allocate(context.Background(), "room-b", "b1", Placement{}); err != wire.ErrBalancerSettling {
		t.Errorf("Server.Allocate while settling: %v", err)
	}
	h.clk.Advance(2 * time.Second)
	_, err = h.allocate("room-a", "test", "a1")
	wantCode(t, err, wire.ErrNoRelays.Code)
}

// TestSettleWindowRoomsNotYetKnown: while it settles, a balancer that does
// not know a room yet answers its join, its location and its migration
// calls 503 balancer_settling (retryable; PurrNet's host migration takes
// room_not_found as final), a room its relay has republished is answered
// as ever, a relay's own room_not_found passes through, and after the
// window an unknown room is room_not_found again.
func TestSettleWindowRoomsNotYetKnown(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SettleWindow = 2 * time.Second })
	f := newFakeRelay(t, "eu")
	f.register(h)
	unknown := func(what string, want *wire.Error) {
		t.Helper()
		_, err := h.join("later")
		wantCode(t, err, want.Code)
		_, err = h.locate("later", internalAuth)
		wantCode(t, err, want.Code)
		status, body, _ := h.do(http.MethodPost, wire.PathMigrationActivate, migHeaders(wire.OpActivate, "later"), nil)
		e := decodeAnswer(t, status, body, nil)
		wantCode(t, e, want.Code)
		if e != nil && (e.Retryable != want.Retryable || e.Status != want.Status) {
			t.Errorf("%s: activate answered %d retryable=%v, want %d retryable=%v", what, e.Status, e.Retryable, want.Status, want.Retryable)
		}
	}
	unknown("settling", wire.ErrBalancerSettling)

	wantStatuses(t, f.publish(h, pub("known", "e1", 1, 0)), wire.PubApplied)
	if c, err := h.join("known"); err != nil || c.Host == "" {
		t.Errorf("join of a republished room while settling: %v %+v", err, c)
	}
	f.set(func(f *fakeRelay) {
		f.migrate = func(w http.ResponseWriter, r *http.Request) { wire.WriteError(w, wire.ErrRoomNotFound) }
	})
	status, body, _ := h.do(http.MethodPost, wire.PathMigrationActivate, migHeaders(wire.OpActivate, "known"), nil)
	wantCode(t, decodeAnswer(t, status, body, nil), wire.ErrRoomNotFound.Code)

	h.clk.Advance(2 * time.Second)
	unknown("settled", wire.ErrRoomNotFound)
}
