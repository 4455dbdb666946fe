package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/relay"
	"github.com/purrfly/purrfly/wire"
)

// TestBalancerRestart: the balancer is closed mid-run and a new process
// starts on the same port with empty state; within one relay heartbeat
// every live room is published again, with its counts, and joinable with
// its original client credential. Sessions on the relays never noticed.
func TestBalancerRestart(t *testing.T) {
	b1 := newBalancer(t, 0, nil)
	port := b1.Port()
	eu := newRelay(t, b1.URL(), "eu", nil)
	us := newRelay(t, b1.URL(), "us", nil)
	api := newAPI(t, b1.URL())
	waitRegistered(t, api, eu.BootID(), us.BootID())

	type live struct {
		*pair
		secret  string
		players int
	}
	var rooms []live
	for i, region := range []string{"eu", "us", "eu", "us"} {
		p := newPair(t, api, region, roomName("restart", i))
		c, _ := joinable(t, api, p.name)
		rooms = append(rooms, live{pair: p, secret: c.Secret, players: 2})
	}
	if _, err := api.Allocate(tctx(t), "eu", "restart-empty", client.NewAllocationID()); err != nil {
		t.Fatal(err)
	}
	emptySecret, _ := joinable(t, api, "restart-empty")

	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Servers(tctx(t)); err == nil {
		t.Fatal("balancer still answers after Close")
	}
	b2 := newBalancer(t, port, nil)
	restarted := time.Now()
	if b2.BootID() == b1.BootID() {
		t.Fatal("the new balancer process reuses the old boot id")
	}
	testutil.Eventually(t, heartbeat+time.Second, "every room republished after the balancer restart", func() bool {
		listed := listAll(t, api)
		for _, r := range rooms {
			c, ok := joinable(t, api, r.name)
			if !ok || c.Secret != r.secret || listed[r.name].ConnectedPlayers != r.players {
				return false
			}
		}
		c, ok := joinable(t, api, "restart-empty")
		return ok && c.Secret == emptySecret.Secret && len(listed) == len(rooms)+1
	})
	t.Logf("rooms republished %v after the new balancer started (heartbeat %v)", time.Since(restarted).Round(time.Millisecond), heartbeat)
	if n, err := api.TotalConnections(tctx(t)); err != nil || n != 8 {
		t.Fatalf("/getTotalConnections = %d, %v after restart, want 8", n, err)
	}
	for i, r := range rooms {
		roundTrip(t, r.host, r.cl, r.id, "survived")
		// A new player joins through the new balancer.
		cl := joinClient(t, api, r.name)
		id := expectConnected(t, r.host)[0]
		roundTrip(t, r.host, cl, id, roomName("joined", i))
	}
}

// TestRelayRestartSameEndpoint: a relay restarts on the same endpoint (same
// ports, new boot id). The balancer drops the old boot's rooms at once, and
// the old boot's delayed heartbeat and room publication (replayed byte for
// byte as the old process sent them) are refused; a new room of the same
// name on the new boot is not disturbed by them.
func TestRelayRestartSameEndpoint(t *testing.T) {
	b := newBalancer(t, 0, nil)
	api := newAPI(t, b.URL())
	link := newLinkProxy(t, b.URL())
	old := newRelay(t, link.URL(), "eu", nil)
	waitRegistered(t, api, old.BootID())
	p := newPair(t, api, "eu", "old-room")
	oldJoin, _ := joinable(t, api, "old-room")
	// Wait for a heartbeat snapshot that carries the room (with the client).
	var oldPublish []byte
	testutil.Eventually(t, 2*time.Second, "the old boot to publish old-room", func() bool {
		oldPublish = link.last(wire.PathPublish, `"old-room"`)
		return oldPublish != nil && strings.Contains(string(oldPublish), `"connections":2`)
	})
	oldRegister := link.last(wire.PathRegister, old.BootID())
	if oldRegister == nil {
		t.Fatal("no heartbeat of the old boot recorded")
	}
	httpPort, wsPort := portOf(t, old.HTTPURL()), portOf(t, old.WSURL())

	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if st := expectClosed(t, clientRead(p.cl)); st != client.StatusServiceRestart {
		t.Fatalf("client closed with %d when its relay closed, want 1012", st)
	}
	fresh := newRelay(t, b.URL(), "eu", func(o *relay.Options) { o.HTTPPort, o.WSPort = httpPort, wsPort })
	if fresh.BootID() == old.BootID() || fresh.HTTPURL() != old.HTTPURL() {
		t.Fatalf("restart: boot %s at %s, old %s at %s", fresh.BootID(), fresh.HTTPURL(), old.BootID(), old.HTTPURL())
	}
	waitRegistered(t, api, fresh.BootID())
	if !notFound(t, api, "old-room") {
		t.Fatal("old-room still joinable once the new boot registered")
	}

	// The prior process's delayed heartbeat: stale_boot, nothing changes.
	a := internalPost(t, b.URL(), wire.PathRegister, oldRegister, nil)
	if e := a.wireErr(t); a.status != http.StatusConflict || e.Code != "stale_boot" {
		t.Fatalf("delayed heartbeat of the old boot: %d %s, want 409 stale_boot", a.status, a.body)
	}
	ins, err := api.Instances(tctx(t), testSecret)
	if err != nil || len(ins) != 1 || ins[0].BootID != fresh.BootID() {
		t.Fatalf("instances after the delayed heartbeat = %+v, %v; want only the new boot", ins, err)
	}
	// Its delayed room publication: rejected, the room stays gone.
	checkRejected := func() {
		t.Helper()
		var pr wire.PublishResponse
		a := internalPost(t, b.URL(), wire.PathPublish, oldPublish, &pr)
		if a.status != http.StatusOK || len(pr.Results) == 0 {
			t.Fatalf("delayed publication: %d %s", a.status, a.body)
		}
		for _, r := range pr.Results {
			if r.Status != wire.PubRejected {
				t.Fatalf("delayed publication of %s by the old boot: %s, want rejected", r.Name, r.Status)
			}
		}
	}
	checkRejected()
	if !notFound(t, api, "old-room") {
		t.Fatal("the old boot's delayed publication brought old-room back")
	}
	if _, listed := listAll(t, api)["old-room"]; listed {
		t.Fatal("old-room listed after the old boot's delayed publication")
	}

	// The name is free for the new boot; the old publication cannot touch it.
	np := newPair(t, api, "eu", "old-room")
	checkRejected()
	c, ok := joinable(t, api, "old-room")
	if !ok || c.Secret == oldJoin.Secret {
		t.Fatalf("old-room after a delayed publication: joinable %v, same secret as the old boot %v", ok, c.Secret == oldJoin.Secret)
	}
	roundTrip(t, np.host, np.cl, np.id, "new-boot")
	testutil.Eventually(t, 2*time.Second, "old-room to list the new boot's 2 players", func() bool {
		return listAll(t, api)["old-room"].ConnectedPlayers == 2
	})
	checkRejected() // a delayed count of the old boot does not overwrite it
	if r := listAll(t, api)["old-room"]; r.ConnectedPlayers != 2 {
		t.Fatalf("old-room lists %d players after the old boot's publication, want 2", r.ConnectedPlayers)
	}
}

// TestUnregisterAfterBalancerReturns: the balancer cannot be reached while
// a room closes; once it can, the relay's retried unregister removes the
// room from /join and /list. Variant "restart": the balancer process itself
// restarted meanwhile, and the closed room is not resurrected.
func TestUnregisterAfterBalancerReturns(t *testing.T) {
	t.Run("outage", func(t *testing.T) {
		b := newBalancer(t, 0, nil)
		api := newAPI(t, b.URL())
		link := newLinkProxy(t, b.URL())
		r := newRelay(t, link.URL(), "eu", nil)
		waitRegistered(t, api, r.BootID())
		closing := allocHost(t, api, "eu", "closing")
		staying := newPair(t, api, "eu", "staying")

		link.down.Store(true)
		if err := closing.host.Close(); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 2*time.Second, "the relay to drop the closed room", func() bool { return r.Stats().Rooms == 1 })
		// Let the prompt unregister and at least one heartbeat fail.
		testutil.Eventually(t, 3*heartbeat+time.Second, "a failed unregister and heartbeat", func() bool {
			return link.droppedCount(wire.PathUnregister) >= 1 && link.droppedCount(wire.PathRegister) >= 1
		})
		if _, ok := joinable(t, api, "closing"); !ok {
			t.Fatal("the balancer lost the room before the unregister could reach it: the test proves nothing")
		}
		link.down.Store(false)
		testutil.Eventually(t, 3*heartbeat+time.Second, "the unregister to reach the balancer", func() bool {
			_, listed := listAll(t, api)["closing"]
			return !listed && notFound(t, api, "closing")
		})
		if _, ok := joinable(t, api, "staying"); !ok {
			t.Fatal("staying vanished")
		}
		roundTrip(t, staying.host, staying.cl, staying.id, "staying")
	})
	t.Run("superseded", func(t *testing.T) {
		// The room closes on relay A while A cannot reach the balancer; the
		// balancer restarts and the name is taken anew on relay B; A's
		// late unregister must not remove B's room.
		b1 := newBalancer(t, 0, nil)
		port := b1.Port()
		api := newAPI(t, b1.URL())
		link := newLinkProxy(t, b1.URL())
		a := newRelay(t, link.URL(), "eu", nil)
		bRelay := newRelay(t, b1.URL(), "us", nil)
		waitRegistered(t, api, a.BootID(), bRelay.BootID())
		old := allocHost(t, api, "eu", "shared")
		link.down.Store(true)
		if err := old.host.Close(); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 2*time.Second, "relay A to drop shared", func() bool { return a.Stats().Rooms == 0 })
		// This time the balancer stops gracefully: Shutdown returns promptly.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := b1.Shutdown(ctx); err != nil {
			t.Fatalf("balancer Shutdown: %v", err)
		}
		newBalancer(t, port, nil)
		waitRegistered(t, api, bRelay.BootID())
		np := newPair(t, api, "us", "shared")
		fresh, _ := joinable(t, api, "shared")
		if np.hostCap.Port != portOf(t, bRelay.WSURL()) {
			t.Fatal("shared was not placed on relay B")
		}
		sent := link.answeredCount(wire.PathUnregister)
		link.down.Store(false)
		testutil.Eventually(t, 3*heartbeat+2*time.Second, "relay A's late unregister to be answered", func() bool {
			return link.answeredCount(wire.PathUnregister) > sent
		})
		if link.last(wire.PathUnregister, `"shared"`) == nil {
			t.Fatal("relay A never sent its unregister of shared: the test proves nothing")
		}
		c, ok := joinable(t, api, "shared")
		if !ok || c.Secret != fresh.Secret || c.Port != fresh.Port {
			t.Fatal("relay A's late unregister removed or changed relay B's newer room")
		}
		roundTrip(t, np.host, np.cl, np.id, "superseded")
	})
	t.Run("restart", func(t *testing.T) {
		b1 := newBalancer(t, 0, nil)
		port := b1.Port()
		api := newAPI(t, b1.URL())
		r := newRelay(t, b1.URL(), "eu", nil)
		waitRegistered(t, api, r.BootID())
		closing := allocHost(t, api, "eu", "closing")
		staying := newPair(t, api, "eu", "staying")
		if err := b1.Close(); err != nil {
			t.Fatal(err)
		}
		if err := closing.host.Close(); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 2*time.Second, "the relay to drop the closed room", func() bool { return r.Stats().Rooms == 1 })
		newBalancer(t, port, nil)
		testutil.Eventually(t, heartbeat+time.Second, "staying to be republished", func() bool { _, ok := joinable(t, api, "staying"); return ok })
		if !notFound(t, api, "closing") {
			t.Fatal("the closed room came back after the balancer restarted")
		}
		if l := listAll(t, api); len(l) != 1 {
			t.Fatalf("/list after restart = %v, want only staying", l)
		}
		roundTrip(t, staying.host, staying.cl, staying.id, "staying")
	})
}

// TestLostAllocationResponse: an allocation whose answer is lost, between
// client and balancer or between balancer and relay, is retried with the
// same allocation_id and yields the same capability and one room; another
// allocation id cannot take the room meanwhile.
func TestLostAllocationResponse(t *testing.T) {
	t.Run("client-balancer", func(t *testing.T) {
		s := startDev(t, nil)
		lose := &loseFirst{next: leakCheckingClient(t).Transport, path: "/allocate_ws"}
		api := &client.Balancer{BaseURL: s.bal.URL(), HTTP: &http.Client{Transport: lose}, Timeout: stepTimeout}
		c, _, err := api.AllocateRetry(tctx(t), "eu", "lost-answer", client.Retry{Tries: 3, Delay: 20 * time.Millisecond})
		if err != nil {
			t.Fatalf("allocate with retry: %v", err)
		}
		var lost wire.Capability
		if err := json.Unmarshal(lose.lostBody(), &lost); err != nil || lost.Secret == "" {
			t.Fatalf("the first answer was not a capability: %s", lose.lostBody())
		}
		if lost != c {
			t.Fatalf("retry answered %+v, the lost answer was %+v: want the same capability", redact(c), redact(lost))
		}
		checkOneRoom(t, s.api, s.relays, "lost-answer")
		h, err := client.DialHost(tctx(t), c, "lost-answer", nil)
		if err != nil {
			t.Fatal(err)
		}
		h.CloseNow()
	})
	t.Run("balancer-relay", func(t *testing.T) {
		lose := &loseFirst{next: http.DefaultTransport.(*http.Transport).Clone(), path: wire.PathRelayAllocate}
		t.Cleanup(lose.next.(*http.Transport).CloseIdleConnections)
		b := newBalancer(t, 0, func(o *balancer.Options) {
			o.HTTPClient = &http.Client{Transport: lose, Timeout: 5 * time.Second}
		})
		r := newRelay(t, b.URL(), "eu", nil)
		api := newAPI(t, b.URL())
		waitRegistered(t, api, r.BootID())
		id := client.NewAllocationID()
		_, err := api.Allocate(tctx(t), "eu", "lost-upstream", id)
		var we *wire.Error
		if !errors.As(err, &we) || !we.Retryable || we.Status < 500 {
			t.Fatalf("allocation whose relay answer was lost: %v, want a retryable 5xx", err)
		}
		t.Logf("lost relay answer surfaced as %d %s", we.Status, we.Code)
		var lost wire.RelayAllocation
		if err := json.Unmarshal(lose.lostBody(), &lost); err != nil || lost.Capability.Secret == "" {
			t.Fatalf("the relay's lost answer: %s", lose.lostBody())
		}
		// Another allocation id cannot take over the room the relay holds.
		_, err = api.Allocate(tctx(t), "eu", "lost-upstream", client.NewAllocationID())
		if !errors.Is(err, wire.ErrRoomTaken) {
			t.Fatalf("competing allocation after a lost answer: %v, want room_name_taken", err)
		}
		c, err := api.Allocate(tctx(t), "eu", "lost-upstream", id)
		if err != nil {
			t.Fatalf("exact retry: %v", err)
		}
		if c.Secret != lost.Capability.Secret || c.Port != lost.Capability.Port {
			t.Fatal("exact retry answered another capability than the relay's lost answer")
		}
		checkOneRoom(t, api, []*relay.Server{r}, "lost-upstream")
		p := &pair{}
		p.open = &open{name: "lost-upstream", hostCap: c}
		if p.host, err = client.DialHost(tctx(t), c, "lost-upstream", nil); err != nil {
			t.Fatal(err)
		}
		defer p.host.CloseNow()
		p.cl = joinClient(t, api, "lost-upstream")
		p.id = expectConnected(t, p.host)[0]
		roundTrip(t, p.host, p.cl, p.id, "lost-upstream")
	})
}

func checkOneRoom(t testing.TB, api *client.Balancer, relays []*relay.Server, name string) {
	t.Helper()
	l, err := api.List(tctx(t), 0)
	if err != nil || l.Total != 1 || l.Results[0].Name != name {
		t.Fatalf("/list = %+v, %v; want just %s", l, err, name)
	}
	if n := totalRooms(relays); n != 1 {
		t.Fatalf("relays hold %d rooms, want 1", n)
	}
}
