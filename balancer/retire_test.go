package balancer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// heartbeat sends one heartbeat of f with the given retiring and
// reachability flags.
func heartbeat(t *testing.T, h *harness, f *fakeRelay, retiring bool, by time.Time, unreachable bool) {
	t.Helper()
	f.mu.Lock()
	info := f.info
	f.mu.Unlock()
	var resp wire.RegisterResponse
	noErr(t, f.post(h, wire.PathRegister, wire.RegisterRequest{Relay: info, Retiring: retiring, RetireBy: by, Unreachable: unreachable}, &resp))
}

func instanceStatus(t *testing.T, h *harness, boot string) wire.Instance {
	t.Helper()
	for _, in := range h.s.st.instances() {
		if in.BootID == boot {
			return in
		}
	}
	t.Fatalf("boot %s is not listed", boot)
	return wire.Instance{}
}

// TestRetiringRelayGetsNoRoom: a heartbeat saying retiring takes the relay
// out of placement for the rest of its boot (a later heartbeat without the
// flag, say one delayed from before the retirement, does not bring it
// back), the admin API lists it as retiring with its latest stop, apart
// from draining, and the stats count it apart; a relay that says players
// cannot reach it yet is listed as starting and gets no room until its
// heartbeat says otherwise.
func TestRetiringRelayGetsNoRoom(t *testing.T) {
	h := newHarness(t, nil)
	old := newFakeRelay(t, "eu")
	old.register(h)
	fresh := newFakeRelay(t, "eu")
	fresh.register(h)
	by := h.clk.Now().Add(2 * time.Hour).Truncate(time.Second)

	heartbeat(t, h, fresh, false, time.Time{}, true)
	if in := instanceStatus(t, h, fresh.boot()); in.Status != wire.InstanceStarting {
		t.Fatalf("an unreachable relay is listed %q, want starting", in.Status)
	}
	heartbeat(t, h, old, true, by, false)
	if _, err := h.s.Allocate(t.Context(), "nowhere", "id-nowhere", Placement{Region: "eu"}); !strings.Contains(fmt.Sprint(err), "1 retiring, 1 starting") {
		t.Fatalf("allocation with only a retiring and a starting relay: %v, want no_candidate naming both", err)
	}
	heartbeat(t, h, fresh, false, time.Time{}, false)
	for i := range 5 {
		name := fmt.Sprintf("room-%d", i)
		if got := placedOn(t, h, name, Placement{Region: "eu"}); got != fresh.info.Endpoint {
			t.Fatalf("room %s placed on %s, want the reachable, non-retiring relay", name, got)
		}
	}
	heartbeat(t, h, old, false, time.Time{}, false) // delayed, from before the retirement
	if got := placedOn(t, h, "after", Placement{Region: "eu"}); got != fresh.info.Endpoint {
		t.Fatalf("a heartbeat without the flag made the retiring relay take a room")
	}
	in := instanceStatus(t, h, old.boot())
	if in.Status != wire.InstanceRetiring || in.RetireBy != by.UTC().Format(time.RFC3339) {
		t.Fatalf("retiring relay listed as %q, retireBy %q; want retiring by %s", in.Status, in.RetireBy, by)
	}
	if _, err := h.s.Allocate(t.Context(), "pinned", "id-pinned", Placement{Instance: old.boot()}); err == nil || !strings.Contains(err.Error(), "retiring") {
		t.Fatalf("a room pinned to the retiring relay: %v, want instance_draining saying retiring", err)
	}
	st := h.s.st.stats()
	if st.Retiring != 1 || st.Draining != 0 || st.Regions[0].Retiring != 1 {
		t.Fatalf("stats %+v: want 1 retiring, 0 draining", st)
	}
	for _, s := range h.servers() {
		if s.APIEndpoint == old.info.Endpoint {
			t.Fatalf("/servers lists the retiring relay while another serves its region")
		}
	}
}

// TestRetiringRelayRefusalTriesTheNext: a relay that answers relay_retiring
// to an allocation (it retired before its heartbeat said so) took no
// room: the balancer places it on the next relay.
func TestRetiringRelayRefusalTriesTheNext(t *testing.T) {
	h := newHarness(t, nil)
	refusing := newFakeRelay(t, "eu")
	refusing.set(func(f *fakeRelay) { f.allocMode = allocRetiring })
	refusing.register(h)
	other := newFakeRelay(t, "eu")
	other.register(h)
	// The refusing relay is the emptier one: least-loaded placement tries it first.
	wantStatuses(t, other.publish(h, pub("busy", "e", 1, 3)), wire.PubApplied)
	if got := placedOn(t, h, "r", Placement{Region: "eu"}); got != other.info.Endpoint {
		t.Fatalf("placed on %s, want the relay that is not retiring", got)
	}
	if refusing.allocCalls.Load() != 1 {
		t.Fatalf("the retiring relay was asked %d times, want once", refusing.allocCalls.Load())
	}
}

// TestBootWatch: a watch that knows the current boot is held until its
// wait passes or the balancer stops (which it says); one that does not
// know it is answered at once.
func TestBootWatch(t *testing.T) {
	h := newHarness(t, nil)
	url := h.s.URL()
	get := func(known string, wait int) wire.BalancerBoot {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s%s?known=%s&wait=%d", url, wire.PathBalancerBoot, known, wait), nil)
		if err != nil {
			return wire.BalancerBoot{BalancerBoot: err.Error()}
		}
		req.Header.Set(wire.HeaderInternalSecret, testSecret)
		resp, err := h.client.Do(req)
		if err != nil {
			return wire.BalancerBoot{BalancerBoot: err.Error()}
		}
		defer resp.Body.Close()
		var out wire.BalancerBoot
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil {
			return wire.BalancerBoot{BalancerBoot: fmt.Sprintf("answer %d %s", resp.StatusCode, b)}
		}
		return out
	}
	if got := get("another", 20); got.BalancerBoot != h.s.BootID() {
		t.Fatalf("boot watch answered %+v, want boot %s", got, h.s.BootID())
	}
	held := make(chan wire.BalancerBoot, 1)
	var waiting atomic.Int32
	h.s.onBootWait = func() { waiting.Add(1) }
	go func() { held <- get(h.s.BootID(), 20) }()
	waitFor(t, "the watch to wait", func() bool { return waiting.Load() == 1 })
	select {
	case got := <-held:
		t.Fatalf("a watch that knows the boot was answered at once: %+v", got)
	case <-time.After(50 * time.Millisecond):
	}
	h.clk.Advance(20 * time.Second)
	if got := <-held; got.BalancerBoot != h.s.BootID() || got.Draining {
		t.Fatalf("held watch answered %+v", got)
	}
	go func() { held <- get(h.s.BootID(), 20) }()
	waitFor(t, "the watch to wait", func() bool { return waiting.Load() == 2 })
	h.client.CloseIdleConnections()
	stopped := make(chan error, 1)
	go func() { stopped <- h.s.Shutdown(t.Context()) }()
	if got := <-held; !got.Draining {
		t.Fatalf("a watch held while the balancer stops answered %+v, want draining", got)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown with a watch held: %v", err)
	}
}

// TestShutdownNotHeldByAnUnusedConnection: a connection that never sent a
// request (a proxy's spare) does not hold the balancer's shutdown, which
// net/http would let wait 5 s for it: every allocation waits for the
// balancer's successor.
func TestShutdownNotHeldByAnUnusedConnection(t *testing.T) {
	h := newHarness(t, nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(h.s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, "the connection to be tracked", func() bool {
		h.s.fresh.mu.Lock()
		defer h.s.fresh.mu.Unlock()
		return len(h.s.fresh.conns) == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := h.s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with an unused connection open: %v", err)
	}
}

// FuzzBootWatch: the query of a boot watch. It answers this balancer's
// boot, or a 400 for a wait that is not a number of seconds; it never
// holds a request past its context (the fuzz's stays short).
func FuzzBootWatch(f *testing.F) {
	f.Add("known=x&wait=20")
	f.Add("wait=-1")
	f.Add("wait=99999999999999999999")
	f.Add("known=&wait=abc")
	f.Add("known=x&known=y&wait=0")
	s, _ := newFuzzBalancer(f)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, query string) {
		u, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req := httptest.NewRequest(http.MethodGet, wire.PathBalancerBoot+"?"+u.Encode(), nil).WithContext(ctx)
		wire.SetInternal(req.Header, testSecret)
		status, out := serveFuzz(t, h, req)
		switch status {
		case http.StatusOK:
			var b wire.BalancerBoot
			if json.Unmarshal(out, &b) != nil || b.BalancerBoot != s.BootID() {
				t.Fatalf("%q: %s", query, out)
			}
		case http.StatusBadRequest:
		default:
			t.Fatalf("%q: %d %s", query, status, out)
		}
	})
}
