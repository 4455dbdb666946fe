package balancer

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// migHeaders are a claim's public headers for room name.
func migHeaders(op wire.MigrationOp, name string) map[string]string {
	req := wire.MigrationRequest{Op: op, Name: name, Secret: "client-secret", ClaimID: "claim-1",
		Incarnation: "inc-1", ExpectedGeneration: 0, PromotedPlayerID: "42", FencingToken: "fence-1"}
	h := http.Header{}
	req.SetHeaders(h)
	out := map[string]string{}
	for k := range h {
		out[k] = h.Get(k)
	}
	return out
}

// claimAnswer is a complete claim answer as a relay gives it.
func claimAnswer(name string) wire.MigrationClaim {
	return wire.MigrationClaim{
		MigrationState: wire.MigrationState{Host: "internal-name-of-relay", Port: 6942, UDPPort: 7777, UDPPortV2: 7778,
			RoomName: name, Incarnation: "inc-1", Generation: 1, FencingToken: "fence-2", PromotedPlayerID: "42",
			HostPhase: wire.HostPhasePending, ClaimPending: true},
		Secret: "new-host-secret", ClaimID: "claim-1",
	}
}

// roomOn allocates name through the balancer on f and returns its fake room.
func roomOn(t *testing.T, h *harness, f *fakeRelay, name string) *fakeRoom {
	t.Helper()
	f.register(h)
	if _, err := h.allocate(name, "eu", "alloc-"+name); err != nil {
		t.Fatalf("allocate: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rooms[name]
}

// The balancer forwards a migration call with the route it read (the
// room's epoch, its publication revision, the relay's boot) in internal
// headers; it checks a successful claim's answer before adding the relay's
// own host to it; and no answer may be cached (Cache-Control no-store,
// private, and Pragma no-cache).
func TestMigrationForwardedWithRouteSnapshot(t *testing.T) {
	h := newHarness(t, nil)
	f := newFakeRelay(t, "eu")
	room := roomOn(t, h, f, "snap")
	var got http.Header
	f.set(func(f *fakeRelay) {
		f.migrate = func(w http.ResponseWriter, r *http.Request) {
			got = r.Header.Clone()
			wire.WriteJSON(w, http.StatusOK, claimAnswer("snap"))
		}
	})
	status, body, hdr := h.do(http.MethodPost, wire.PathMigrationClaim, migHeaders(wire.OpClaim, "snap"), nil)
	var c wire.MigrationClaim
	noErr(t, decodeAnswer(t, status, body, &c))
	switch {
	case got.Get(wire.HeaderTargetBoot) != f.boot(), got.Get(wire.HeaderRoomEpoch) != room.epoch,
		got.Get(wire.HeaderRoomRevision) != "1", got.Get(wire.HeaderInternalSecret) != testSecret,
		got.Get(wire.HeaderMigrationClaimID) != "claim-1", got.Get(wire.HeaderPromotedPlayerID) != "42":
		t.Fatalf("the relay got headers %v", got)
	}
	if c.Host != "eu.relay.test" || c.Secret != "new-host-secret" || c.Generation != 1 {
		t.Fatalf("claim answer %+v, want the registered host injected", c)
	}
	if hdr.Get("Cache-Control") != "no-store, private" || hdr.Get("Pragma") != "no-cache" {
		t.Fatalf("cache headers %v", hdr)
	}
}

// A migration change whose relay call timed out or lost its answer is a
// retryable 503 migration_outcome_indeterminate: the relay may have
// committed it.
func TestMigrationLostAnswerIsIndeterminate(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RelayTimeout = 300 * time.Millisecond })
	f := newFakeRelay(t, "eu")
	roomOn(t, h, f, "lost")
	for _, mode := range []string{"dropped", "stalled"} {
		f.set(func(f *fakeRelay) {
			f.migrate = func(w http.ResponseWriter, r *http.Request) {
				if mode == "stalled" {
					<-r.Context().Done()
					return
				}
				w.Header().Set("Content-Length", "4096")
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, `{"roomName":`)
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			}
		})
		for _, op := range []wire.MigrationOp{wire.OpAuthorize, wire.OpClaim, wire.OpActivate} {
			status, body, _ := h.do(op.Method(), op.PublicPath(), migHeaders(op, "lost"), nil)
			e := decodeAnswer(t, status, body, nil)
			if e == nil || e.Code != wire.ErrMigrationIndeterminate.Code || e.Status != http.StatusServiceUnavailable || !e.Retryable {
				t.Fatalf("%s %s: %v, want retryable 503 migration_outcome_indeterminate", mode, op, e)
			}
		}
		// A read is never "indeterminate": it changed nothing.
		status, body, _ := h.do(http.MethodGet, wire.PathMigrationCurrent, migHeaders(wire.OpCurrent, "lost"), nil)
		wantCode(t, decodeAnswer(t, status, body, nil), wire.ErrRelayFailed.Code)
	}
}

// "an incomplete upstream response becomes a sanitized retryable 502", and
// anything else the relay answers does not leak.
func TestMigrationMalformedAnswersSanitized(t *testing.T) {
	h := newHarness(t, nil)
	f := newFakeRelay(t, "eu")
	roomOn(t, h, f, "bad")
	answers := map[string]func(w http.ResponseWriter){
		"no credential": func(w http.ResponseWriter) {
			c := claimAnswer("bad")
			c.Secret = ""
			wire.WriteJSON(w, http.StatusOK, c)
		},
		"no port": func(w http.ResponseWriter) {
			c := claimAnswer("bad")
			c.Port, c.Secret = 0, "leaky-secret"
			wire.WriteJSON(w, http.StatusOK, c)
		},
		"another room": func(w http.ResponseWriter) { wire.WriteJSON(w, http.StatusOK, claimAnswer("other")) },
		"no TLS mode": func(w http.ResponseWriter) {
			b, _ := json.Marshal(claimAnswer("bad"))
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			delete(m, "ssl")
			wire.WriteJSON(w, http.StatusOK, m)
		},
		"not json": func(w http.ResponseWriter) { _, _ = io.WriteString(w, "<html>leaky-relay-detail</html>") },
		"a stack trace": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "System.Exception: leaky-relay-detail\n   at Rooms.Claim()")
		},
	}
	for what, answer := range answers {
		f.set(func(f *fakeRelay) { f.migrate = func(w http.ResponseWriter, r *http.Request) { answer(w) } })
		status, body, _ := h.do(http.MethodPost, wire.PathMigrationClaim, migHeaders(wire.OpClaim, "bad"), nil)
		e := decodeAnswer(t, status, body, nil)
		if e == nil || e.Status != http.StatusBadGateway || !e.Retryable || e.Code != wire.ErrRelayBadAnswer.Code {
			t.Fatalf("%s: %v, want a retryable 502", what, e)
		}
		if strings.Contains(string(body), "leaky") {
			t.Fatalf("%s: the answer leaks the relay's: %s", what, body)
		}
	}
}

// Migration errors have the project's JSON shape (code, error,
// retryable): the relay's migration errors reach the caller as they are.
func TestMigrationRelayErrorsPassThrough(t *testing.T) {
	h := newHarness(t, nil)
	f := newFakeRelay(t, "eu")
	roomOn(t, h, f, "errs")
	for _, want := range []*wire.Error{wire.ErrGrantRequired, wire.ErrClaimIDConflict, wire.ErrHostActivationExpired,
		wire.ErrHostNotConnected, wire.ErrHostConnectionLost, wire.ErrActivationFence, wire.ErrIncarnationChanged,
		wire.ErrInvalidHostCred, wire.ErrGenerationMismatch, wire.ErrRouteChanged} {
		f.set(func(f *fakeRelay) {
			f.migrate = func(w http.ResponseWriter, r *http.Request) { wire.WriteError(w, want) }
		})
		status, body, _ := h.do(http.MethodPost, wire.PathMigrationClaim, migHeaders(wire.OpClaim, "errs"), nil)
		e := decodeAnswer(t, status, body, nil)
		if e == nil || e.Code != want.Code || e.Status != want.Status || e.Retryable != want.Retryable {
			t.Fatalf("relay said %s: the caller got %v", want.Code, e)
		}
	}
	// A relay that runs another boot now: the route changed.
	f.set(func(f *fakeRelay) {
		f.migrate = func(w http.ResponseWriter, r *http.Request) { wire.WriteError(w, wire.ErrStaleBoot) }
	})
	status, body, _ := h.do(http.MethodPost, wire.PathMigrationClaim, migHeaders(wire.OpClaim, "errs"), nil)
	wantCode(t, decodeAnswer(t, status, body, nil), wire.ErrRouteChanged.Code)
	// No route at all.
	status, body, _ = h.do(http.MethodPost, wire.PathMigrationClaim, migHeaders(wire.OpClaim, "nowhere"), nil)
	wantCode(t, decodeAnswer(t, status, body, nil), wire.ErrRoomNotFound.Code)
}

// A migration change holds its own room's route lease, and nothing wider,
// while it waits on the relay (count publications take the same room
// lease), so calls for other rooms of that relay go on meanwhile.
func TestMigrationHoldsOnlyTheRoomLease(t *testing.T) {
	h := newHarness(t, nil)
	f := newFakeRelay(t, "eu")
	held := roomOn(t, h, f, "held")
	roomOn(t, h, f, "free")
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	f.set(func(f *fakeRelay) {
		f.migrate = func(w http.ResponseWriter, r *http.Request) {
			name := r.Header.Get(wire.HeaderName)
			if name == "held" {
				entered <- struct{}{}
				<-release
			}
			wire.WriteJSON(w, http.StatusOK, claimAnswer(name))
		}
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		status, body, _ := h.do(http.MethodPost, wire.PathMigrationClaim, migHeaders(wire.OpClaim, "held"), nil)
		noErr(t, decodeAnswer(t, status, body, nil))
	})
	<-entered
	// Another room on the same relay: not held up.
	status, body, _ := h.do(http.MethodPost, wire.PathMigrationClaim, migHeaders(wire.OpClaim, "free"), nil)
	noErr(t, decodeAnswer(t, status, body, nil))
	// The held room's publication waits for the lease.
	published := make(chan struct{})
	wg.Go(func() {
		f.publish(h, pub("held", held.epoch, 5, 2))
		close(published)
	})
	select {
	case <-published:
		t.Fatal("a publication of the room went through while its claim held the lease")
	case <-time.After(100 * time.Millisecond): // wall clock: a bound on a goroutine that must stay blocked
	}
	close(release)
	wg.Wait()
	status, body, _ = h.do(http.MethodGet, "/join", map[string]string{wire.HeaderName: "held"}, nil)
	noErr(t, decodeAnswer(t, status, body, nil))
}

// /migration/current reads the route without holding it and checks it again
// once the relay has answered: an answer from a route that was replaced
// during the read is not given; the new route is read instead.
func TestMigrationCurrentRevalidates(t *testing.T) {
	h := newHarness(t, nil)
	f := newFakeRelay(t, "eu")
	room := roomOn(t, h, f, "moving")
	var epochs []string
	f.set(func(f *fakeRelay) {
		f.migrate = func(w http.ResponseWriter, r *http.Request) {
			epoch := r.Header.Get(wire.HeaderRoomEpoch)
			f.mu.Lock()
			epochs = append(epochs, epoch)
			f.mu.Unlock()
			if epoch == room.epoch {
				// The room is replaced by a new incarnation while we answer.
				wantStatuses(t, f.unregister(h, wire.Removal{Name: "moving", Epoch: room.epoch, Revision: 2}), wire.RemApplied)
				wantStatuses(t, f.publish(h, wire.Publication{Name: "moving", Epoch: "epoch-new", Revision: 1, ClientSecret: "c2"}), wire.PubApplied)
			}
			st := claimAnswer("moving").MigrationState
			st.Incarnation = "inc-of-" + epoch
			wire.WriteJSON(w, http.StatusOK, st)
		}
	})
	status, body, _ := h.do(http.MethodGet, wire.PathMigrationCurrent, migHeaders(wire.OpCurrent, "moving"), nil)
	var st wire.MigrationState
	noErr(t, decodeAnswer(t, status, body, &st))
	if st.Incarnation != "inc-of-epoch-new" || len(epochs) != 2 {
		t.Fatalf("answered %q after reading %v, want the new route's state", st.Incarnation, epochs)
	}
}
