package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestDeadRelayRemoved: a relay that dies without a word (no restart) is
// removed by the balancer's health check: it leaves /servers, its rooms
// leave /join and /list, new rooms go to the survivor, and the survivor's
// rooms are untouched.
func TestDeadRelayRemoved(t *testing.T) {
	s := startDev(t, nil)
	dead, alive := s.relays[0], s.relays[1]
	newPair(t, s.api, "eu", "on-dead")
	p := newPair(t, s.api, "us", "on-alive")
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 4*healthInterval+2*time.Second, "the dead relay to leave /servers", func() bool {
		sv, err := s.api.Servers(tctx(t))
		return err == nil && len(sv) == 1 && sv[0].APIEndpoint == alive.HTTPURL()
	})
	if !notFound(t, s.api, "on-dead") {
		t.Fatal("a room of the dead relay is still joinable")
	}
	if l := listAll(t, s.api); len(l) != 1 {
		t.Fatalf("/list = %v, want only on-alive", l)
	}
	c, err := s.api.Allocate(tctx(t), "eu", "after-death", client.NewAllocationID())
	if err != nil || c.Port != portOf(t, alive.WSURL()) {
		t.Fatalf("allocate in eu after its relay died: port %d, %v; want the us relay", c.Port, err)
	}
	roundTrip(t, p.host, p.cl, p.id, "alive")
}

// TestForgedHeartbeatsRefused: a heartbeat for a live endpoint with a boot
// the endpoint does not report is refused (stale_boot), and one from the live
// boot with changed routing metadata is metadata_changed; neither touches
// the registration or its rooms.
func TestForgedHeartbeatsRefused(t *testing.T) {
	s := startDev(t, nil, "eu")
	r := s.relays[0]
	p := newPair(t, s.api, "eu", "guarded")
	live := wire.RelayInfo{
		BootID: r.BootID(), Endpoint: r.HTTPURL(), Host: "127.0.0.1", Region: "eu",
		Port: portOf(t, r.WSURL()), UDPPort: portOf(t, "udp://"+r.UDP1Addr()), UDPPortV2: portOf(t, "udp://"+r.UDPAddr()),
	}
	beat := func(info wire.RelayInfo) answer {
		body, _ := json.Marshal(wire.RegisterRequest{Relay: info})
		return internalPost(t, s.bal.URL(), wire.PathRegister, body, nil)
	}
	// The genuine metadata is accepted (proves the forged ones differ only
	// where the test says).
	var ok wire.RegisterResponse
	if a := beat(live); a.status != 200 || json.Unmarshal(a.body, &ok) != nil || ok.New {
		t.Fatalf("genuine heartbeat: %d %s", a.status, a.body)
	}
	unproven := live
	unproven.BootID = "forged-boot"
	moved := live
	moved.Region = "us"
	repointed := live
	repointed.Port = 1
	ghost := live // an endpoint where nothing listens cannot prove any boot
	ghost.BootID, ghost.Endpoint = "ghost-boot", "http://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		info wire.RelayInfo
		code string
	}{
		// The endpoint's /ping reports the genuine boot: the balancer reads
		// the stranger as a prior process of that endpoint.
		{"unproven boot", unproven, "stale_boot"},
		{"region changed", moved, "metadata_changed"},
		{"port changed", repointed, "metadata_changed"},
		{"endpoint that proves nothing", ghost, "boot_not_proven"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := beat(tc.info)
			if e := a.wireErr(t); a.status != http.StatusConflict || e.Code != tc.code {
				t.Fatalf("%d %s, want 409 %s", a.status, a.body, tc.code)
			}
			ins, err := s.api.Instances(tctx(t), testSecret)
			if err != nil || len(ins) != 1 || ins[0].BootID != r.BootID() || ins[0].Region != "eu" {
				t.Fatalf("instances = %+v, %v; want the genuine registration", ins, err)
			}
			c, ok := joinable(t, s.api, "guarded")
			if !ok || c.Port != live.Port {
				t.Fatalf("guarded after a forged heartbeat: joinable %v on port %d", ok, c.Port)
			}
		})
	}
	roundTrip(t, p.host, p.cl, p.id, "guarded")
}

// TestDelayedPublicationsFenced: requests of the live relay boot that
// arrive late never win over newer state: an older count is ignored, a
// publication of a released room incarnation is fenced (the room stays
// gone), and neither that publication nor the old incarnation's repeated
// unregister touches a newer room of the same name.
func TestDelayedPublicationsFenced(t *testing.T) {
	b := newBalancer(t, 0, nil)
	api := newAPI(t, b.URL())
	link := newLinkProxy(t, b.URL())
	r := newRelay(t, link.URL(), "eu", nil)
	waitRegistered(t, api, r.BootID())
	p := newPair(t, api, "eu", "fenced")
	var at2 []byte
	testutil.Eventually(t, 2*time.Second, "a publication of fenced with 2 players", func() bool {
		at2 = link.last(wire.PathPublish, `"connections":2`)
		return at2 != nil
	})
	replay := func(body []byte) wire.PublicationStatus {
		t.Helper()
		var pr wire.PublishResponse
		a := internalPost(t, b.URL(), wire.PathPublish, body, &pr)
		for _, res := range pr.Results {
			if res.Name == "fenced" {
				return res.Status
			}
		}
		t.Fatalf("replayed publication: %d %s", a.status, a.body)
		return ""
	}
	players := func() int { return listAll(t, api)["fenced"].ConnectedPlayers }
	// The proxy records a body before forwarding it: wait until the
	// balancer applied it, so that the next count is really newer.
	testutil.Eventually(t, 2*time.Second, "fenced to count 2", func() bool { return players() == 2 })

	// An older count of the live incarnation changes nothing.
	if err := p.cl.Close(); err != nil {
		t.Fatal(err)
	}
	expectDisconnected(t, p.host, p.id)
	testutil.Eventually(t, 2*time.Second, "fenced to count 1", func() bool { return players() == 1 })
	if st := replay(at2); st == wire.PubApplied || players() != 1 {
		t.Fatalf("an older count was %s; /list now says %d players, want 1", st, players())
	}

	// The incarnation is released: its late publication is fenced.
	sent := link.answeredCount(wire.PathUnregister)
	if err := p.host.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Second, "fenced to be released", func() bool {
		return link.answeredCount(wire.PathUnregister) > sent && notFound(t, api, "fenced")
	})
	removal := link.last(wire.PathUnregister, `"fenced"`)
	if st := replay(at2); st != wire.PubFenced {
		t.Fatalf("a released incarnation's publication was %s, want fenced", st)
	}
	if !notFound(t, api, "fenced") {
		t.Fatal("a released room came back through a late publication")
	}

	// A new incarnation of the name is immune to both late requests.
	np := newPair(t, api, "eu", "fenced")
	fresh, _ := joinable(t, api, "fenced")
	if st := replay(at2); st == wire.PubApplied {
		t.Fatal("the old incarnation's publication overwrote the new room")
	}
	var ur wire.UnregisterResponse
	if a := internalPost(t, b.URL(), wire.PathUnregister, removal, &ur); a.status != 200 {
		t.Fatalf("repeated unregister: %d %s", a.status, a.body)
	}
	c, ok := joinable(t, api, "fenced")
	if !ok || c.Secret != fresh.Secret {
		t.Fatalf("after late requests of the old incarnation: joinable %v, same room %v (statuses %+v)", ok, c.Secret == fresh.Secret, ur.Results)
	}
	roundTrip(t, np.host, np.cl, np.id, "new-incarnation")
}
