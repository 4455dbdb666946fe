package balancer

import (
	"net/http"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

func TestPublicationCompareAndSet(t *testing.T) {
	h := newHarness(t, nil)
	a, b := newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	a.register(h)
	b.register(h)

	wantStatuses(t, a.publish(h, pub("room", "e1", 1, 1)), wire.PubApplied)
	wantStatuses(t, a.publish(h, pub("room", "e1", 1, 9)), wire.PubCurrent)  // same revision
	wantStatuses(t, a.publish(h, pub("room", "e1", 3, 4)), wire.PubApplied)  // newer: count updated
	wantStatuses(t, a.publish(h, pub("room", "e1", 2, 7)), wire.PubCurrent)  // older: ignored
	wantStatuses(t, a.publish(h, pub("room", "e2", 9, 0)), wire.PubConflict) // another epoch
	wantStatuses(t, b.publish(h, pub("room", "b1", 1, 0)), wire.PubConflict) // another relay
	if l := h.list(0); l.Total != 1 || l.Results[0].ConnectedPlayers != 4 || l.Results[0].Region != "eu" {
		t.Fatalf("list: %+v", l)
	}

	// Released: the epoch is fenced, the name is free for a new epoch.
	wantStatuses(t, a.unregister(h, wire.Removal{Name: "room", Epoch: "e1", Revision: 3}), wire.RemApplied)
	if _, err := h.join("room"); err == nil {
		t.Fatal("a released room is joinable")
	}
	wantStatuses(t, a.publish(h, pub("room", "e1", 4, 1)), wire.PubFenced)
	wantStatuses(t, b.publish(h, pub("room", "b1", 1, 2)), wire.PubApplied)
	c, err := h.join("room")
	noErr(t, err)
	if c.Host != "us.relay.test" || c.Secret != "cs-room-b1" {
		t.Fatalf("join after reacquire: %+v", c)
	}

	// A boot that is not registered at that endpoint is rejected.
	wantStatuses(t, a.publishAs(h, "never-registered", pub("x", "e1", 1, 0)), wire.PubRejected)

	// A batch is judged entry by entry, in order.
	wantStatuses(t, a.publish(h, pub("p", "e1", 1, 0), pub("room", "e7", 1, 0), pub("q", "e1", 1, 0)),
		wire.PubApplied, wire.PubConflict, wire.PubApplied)
}

func TestPublicationValidation(t *testing.T) {
	h := newHarness(t, nil)
	a := newFakeRelay(t, "eu")
	a.register(h)
	for _, p := range []wire.Publication{
		{Name: "", Epoch: "e", ClientSecret: "c"},
		{Name: "n", Epoch: "", ClientSecret: "c"},
		{Name: "n", Epoch: "e", ClientSecret: ""},
		{Name: "n", Epoch: "e", ClientSecret: "c", Connections: -1},
	} {
		var resp wire.PublishResponse
		err := a.post(h, wire.PathPublish, wire.PublishRequest{BootID: a.boot(), Endpoint: a.info.Endpoint, Rooms: []wire.Publication{p}}, &resp)
		wantCode(t, err, wire.ErrBadRequest.Code)
	}
}

func TestUnregisterOutbox(t *testing.T) {
	h := newHarness(t, nil)
	a := newFakeRelay(t, "eu")
	a.register(h)

	// Unknown name (e.g. the balancer restarted while the room lived):
	// confirmed as superseded, and the incarnation is fenced anyway.
	wantStatuses(t, a.unregister(h, wire.Removal{Name: "ghost", Epoch: "g1", Revision: 5}), wire.RemSuperseded)
	wantStatuses(t, a.publish(h, pub("ghost", "g1", 4, 0)), wire.PubFenced)

	wantStatuses(t, a.publish(h, pub("room", "e1", 5, 2)), wire.PubApplied)
	// A removal with an older revision than held is still the relay's last
	// word on the incarnation: applied (see the package doc).
	wantStatuses(t, a.unregister(h, wire.Removal{Name: "room", Epoch: "e1", Revision: 3}), wire.RemApplied)
	// The same removal again (its confirmation was lost): already.
	wantStatuses(t, a.unregister(h, wire.Removal{Name: "room", Epoch: "e1", Revision: 3}), wire.RemAlready)

	// A newer incarnation owns the name: the old removal is superseded and
	// does not touch it.
	wantStatuses(t, a.publish(h, pub("room", "e2", 1, 1)), wire.PubApplied)
	wantStatuses(t, a.unregister(h, wire.Removal{Name: "room", Epoch: "e0", Revision: 9}), wire.RemSuperseded)
	if _, err := h.join("room"); err != nil {
		t.Fatalf("a stale removal took the newer room down: %v", err)
	}
	// Another boot's removal of this epoch does not touch it either.
	wantStatuses(t, a.unregisterAs(h, "other-boot", wire.Removal{Name: "room", Epoch: "e2", Revision: 9}), wire.RemSuperseded)
	if _, err := h.join("room"); err != nil {
		t.Fatalf("another boot's removal took the room down: %v", err)
	}
	if l := h.list(0); l.Total != 1 {
		t.Fatalf("list: %+v", l)
	}
}

func TestTombstoneFencesThenExpires(t *testing.T) {
	const retention = time.Hour
	h := newHarness(t, func(o *Options) {
		o.TombstoneRetention = retention
		o.CleanupInterval = 30 * time.Second
		o.HealthInterval = 1000 * time.Hour
		o.RelayExpiry = 1000 * time.Hour
	})
	a := newFakeRelay(t, "eu")
	a.register(h)
	wantStatuses(t, a.publish(h, pub("room", "e1", 1, 0)), wire.PubApplied)
	wantStatuses(t, a.unregister(h, wire.Removal{Name: "room", Epoch: "e1", Revision: 1}), wire.RemApplied)
	waitFor(t, "the loops to wait on the clock", func() bool { return h.clk.Waiters() >= 2 })

	// Within the horizon the cleanup keeps the tombstone and it fences.
	h.clk.Advance(retention - time.Minute)
	h.s.st.cleanup()
	wantStatuses(t, a.publish(h, pub("room", "e1", 2, 0)), wire.PubFenced)

	// Past it, the cleanup tick deletes it (checked under the table's lock) and
	// a very late publication of that incarnation is accepted again.
	h.clk.Advance(2 * time.Minute)
	waitFor(t, "the cleanup tick to delete the tombstone", func() bool { return h.s.st.tombs.stats(h.clk.Now()).entries == 0 })
	wantStatuses(t, a.publish(h, pub("room", "e1", 2, 0)), wire.PubApplied)
}

func TestNonPositiveRetentionMeansDefault(t *testing.T) {
	s, err := New(Options{Secret: testSecret, TombstoneRetention: -5})
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.TombstoneRetention != DefaultTombstoneRetention {
		t.Fatalf("retention %v, want %v", s.opts.TombstoneRetention, DefaultTombstoneRetention)
	}
}

func TestCleanupDropsRoutesOfReplacedBoots(t *testing.T) {
	h := newHarness(t, nil)
	a := newFakeRelay(t, "eu")
	a.register(h)
	wantStatuses(t, a.publish(h, pub("room", "e1", 1, 0)), wire.PubApplied)
	if _, err := a.registerAs(h, a.restart()); err != nil {
		t.Fatal(err)
	}
	h.s.st.cleanup()
	if h.s.st.rooms.get("room") != nil {
		t.Fatal("the replaced boot's route survived the cleanup")
	}
}

func TestInternalRoutesNeedTheSecret(t *testing.T) {
	h := newHarness(t, nil)
	st, body, hdr := h.do(http.MethodPost, wire.PathRegister, nil, []byte(`{}`))
	if st != http.StatusUnauthorized || !contains(body, `"unauthorized"`) {
		t.Fatalf("register without secret: %d %s", st, body)
	}
	if hdr.Get(wire.HeaderInternalVersion) == "" {
		t.Fatal("an internal error answer has no protocol version")
	}
	st, body, _ = h.do(http.MethodPost, wire.PathPublish, map[string]string{wire.HeaderInternalSecret: "wrong"}, []byte(`{}`))
	if st != http.StatusUnauthorized || contains(body, testSecret) {
		t.Fatalf("publish with a wrong secret: %d %s", st, body)
	}
	st, _, _ = h.do(http.MethodGet, wire.PathUnregister, map[string]string{wire.HeaderInternalSecret: testSecret}, nil)
	if st != http.StatusMethodNotAllowed {
		t.Fatalf("GET unregister: %d", st)
	}
	st, body, _ = h.do(http.MethodPost, wire.PathRegister, map[string]string{wire.HeaderInternalSecret: testSecret}, []byte(`{not json`))
	if st != http.StatusBadRequest || !contains(body, `"bad_request"`) {
		t.Fatalf("malformed body: %d %s", st, body)
	}
	big := make([]byte, wire.MaxBodySize+10)
	for i := range big {
		big[i] = ' '
	}
	st, body, _ = h.do(http.MethodPost, wire.PathPublish, map[string]string{wire.HeaderInternalSecret: testSecret}, big)
	if st != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d %s", st, body)
	}
}
