package balancer

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// appMachine is a fake relay registered as one machine of a multi-machine
// relay app: its own endpoint, boot and machine id; the app's public host
// and public endpoint.
func appMachine(t *testing.T, h *harness, region, public string) *fakeRelay {
	t.Helper()
	f := newFakeRelay(t, region)
	f.set(func(f *fakeRelay) {
		f.info.Host = "relay-app.example"
		f.info.Port = 443
		f.info.SSL = true
		f.info.PublicEndpoint = public
	})
	f.register(h)
	return f
}

// locate asks the internal room-location route.
func (h *harness) locate(name string, hdr map[string]string) (wire.RoomLocation, *wire.Error) {
	h.t.Helper()
	var loc wire.RoomLocation
	st, b, resp := h.do(http.MethodGet, wire.PathRoomLocation+"?name="+url.QueryEscape(name), hdr, nil)
	if v := resp.Get(wire.HeaderInternalVersion); v == "" {
		h.t.Errorf("room location answer without %s", wire.HeaderInternalVersion)
	}
	return loc, decodeAnswer(h.t, st, b, &loc)
}

var internalAuth = map[string]string{wire.HeaderInternalSecret: testSecret}

// TestMultiMachineApp: the machines of one relay app register one by one,
// /servers lists the app once per region under its public endpoint, new
// rooms spread over the machines with the chosen boot named in the call,
// and the room-location route names the holder until it is gone.
func TestMultiMachineApp(t *testing.T) {
	h := newHarness(t, nil)
	const public = "https://relay-app.example"
	machines := []*fakeRelay{appMachine(t, h, "ams", public), appMachine(t, h, "ams", public), appMachine(t, h, "ams", public)}
	sea := appMachine(t, h, "sea", public)
	other := newFakeRelay(t, "ams") // another relay app in the same region
	other.register(h)

	servers := h.servers()
	if len(servers) != 3 {
		t.Fatalf("/servers lists %d entries, want the app once per region plus the other relay: %+v", len(servers), servers)
	}
	byRegion := map[string]int{}
	for _, sv := range servers {
		if sv.APIEndpoint == public {
			byRegion[sv.Region]++
			if sv.Host != "relay-app.example" || sv.RestPort != 443 || sv.WebSocketsPort != 443 {
				t.Fatalf("app entry %+v", sv)
			}
		}
	}
	if byRegion["ams"] != 1 || byRegion["sea"] != 1 {
		t.Fatalf("app entries by region %v, want one per region: %+v", byRegion, servers)
	}
	// The admin API still shows every machine.
	st, body, _ := h.do(http.MethodGet, wire.PathInstances, map[string]string{"Authorization": "Bearer " + testSecret}, nil)
	var insts wire.InstancesResponse
	noErr(t, decodeAnswer(t, st, body, &insts))
	if len(insts.Instances) != 5 {
		t.Fatalf("%d instances, want 5", len(insts.Instances))
	}

	other.set(func(f *fakeRelay) { f.allocMode = allocDraining }) // keep placement on the app
	sea.set(func(f *fakeRelay) { f.allocMode = allocDraining })
	holders := map[*fakeRelay]int{}
	for i := range 30 {
		name := fmt.Sprintf("room-%02d", i)
		c, err := h.allocate(name, "ams", "alloc-"+name)
		noErr(t, err)
		if c.Host != "relay-app.example" {
			t.Fatalf("capability host %q", c.Host)
		}
		loc, err := h.locate(name, internalAuth)
		noErr(t, err)
		var holder *fakeRelay
		for _, m := range machines {
			if m.boot() == loc.BootID {
				holder = m
			}
		}
		if holder == nil || loc.Endpoint != holder.info.Endpoint || loc.MachineID != holder.info.MachineID ||
			loc.Host != "relay-app.example" || loc.Port != 443 || loc.Region != "ams" || loc.Name != name {
			t.Fatalf("location of %s: %+v", name, loc)
		}
		holder.mu.Lock()
		target := holder.targets[name]
		holder.mu.Unlock()
		if target != holder.boot() {
			t.Fatalf("allocation call of %s named boot %q, went to %q", name, target, holder.boot())
		}
		holders[holder]++
	}
	for i, m := range machines {
		if holders[m] != 10 {
			t.Fatalf("machine %d holds %d rooms, want 10 (spread %v)", i, holders[m], holders)
		}
	}

	// Refusals: no secret, a bad name, an unknown room, a wrong method.
	for _, hdr := range []map[string]string{nil, {wire.HeaderInternalSecret: "wrong"}} {
		_, err := h.locate("room-00", hdr)
		wantCode(t, err, "unauthorized")
	}
	_, err := h.locate("", internalAuth)
	wantCode(t, err, "bad_request")
	_, err = h.locate("nope", internalAuth)
	wantCode(t, err, "room_not_found")
	st, _, _ = h.do(http.MethodPost, wire.PathRoomLocation+"?name=room-00", internalAuth, nil)
	if st != http.StatusMethodNotAllowed {
		t.Fatalf("POST room location: %d", st)
	}

	// A machine that stops answering its health check: its rooms are gone
	// (join and location alike), the others' stay.
	loc, err := h.locate("room-00", internalAuth)
	noErr(t, err)
	var dead *fakeRelay
	for _, m := range machines {
		if m.boot() == loc.BootID {
			dead = m
		}
	}
	dead.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, DefaultHealthFailures)
	gone, kept := 0, 0
	for i := range 30 {
		name := fmt.Sprintf("room-%02d", i)
		_, jerr := h.join(name)
		loc, lerr := h.locate(name, internalAuth)
		switch {
		case jerr != nil && jerr.Code == "room_not_found" && lerr != nil && lerr.Code == "room_not_found":
			gone++
		case jerr == nil && lerr == nil && loc.BootID != dead.boot():
			kept++
		default:
			t.Fatalf("room %s after its machine died: join %v, location %+v %v", name, jerr, loc, lerr)
		}
	}
	if gone != 10 || kept != 20 {
		t.Fatalf("%d rooms gone and %d kept, want 10 and 20", gone, kept)
	}
	if servers := h.servers(); len(servers) != 3 {
		t.Fatalf("/servers after one machine left: %+v", servers)
	}
}

// TestPublicEndpointValidated: a malformed public endpoint is refused at
// registration.
func TestPublicEndpointValidated(t *testing.T) {
	h := newHarness(t, nil)
	f := newFakeRelay(t, "eu")
	for _, bad := range []string{"ftp://x", "http://", "https://app.example/?q=1", "http://" + string(make([]byte, 600))} {
		info := f.info
		info.PublicEndpoint = bad
		_, err := f.registerAs(h, info)
		wantCode(t, err, "bad_request")
	}
}

// TestHandoverPublication: a room handed over between machines of one app
// (wire.PathHandover) moves at the balancer only when the new publication
// names the exact live incarnation it replaced; the old incarnation is then
// fenced, so its late removal and late publications change nothing.
func TestHandoverPublication(t *testing.T) {
	h := newHarness(t, nil)
	const public = "https://relay-app.example"
	from, to := appMachine(t, h, "ams", public), appMachine(t, h, "ams", public)
	other := newFakeRelay(t, "ams") // another relay app
	other.register(h)

	if r := to.register(h); !r.Handover {
		t.Fatal("the balancer does not tell relays that it applies moved publications")
	}
	wantStatuses(t, from.publish(h, pub("room", "f1", 1, 0)), wire.PubApplied)
	moved := func(epoch, fromBoot, fromEpoch string) wire.Publication {
		p := pub("room", epoch, 1, 1)
		p.MovedFrom = &wire.Incarnation{BootID: fromBoot, Epoch: fromEpoch}
		return p
	}
	// Not the live incarnation, or not the same app: a conflict as before.
	wantStatuses(t, to.publish(h, moved("t1", from.boot(), "f0")), wire.PubConflict)
	wantStatuses(t, to.publish(h, moved("t1", "some-other-boot", "f1")), wire.PubConflict)
	wantStatuses(t, other.publish(h, moved("o1", from.boot(), "f1")), wire.PubConflict)
	if loc, err := h.locate("room", internalAuth); err != nil || loc.BootID != from.boot() {
		t.Fatalf("room moved on a refused handover: %+v %v", loc, err)
	}

	wantStatuses(t, to.publish(h, moved("t1", from.boot(), "f1")), wire.PubApplied)
	loc, err := h.locate("room", internalAuth)
	if err != nil || loc.BootID != to.boot() || loc.Connections != 1 {
		t.Fatalf("after the handover the room is at %+v (%v), want boot %s with 1 connection", loc, err, to.boot())
	}
	c, jerr := h.join("room")
	noErr(t, jerr)
	if c.Secret != "cs-room-t1" {
		t.Fatalf("join after handover answers %+v", c)
	}
	// The old holder's removal and a late publication of its incarnation
	// arrive after the move: nothing changes.
	wantStatuses(t, from.unregister(h, wire.Removal{Name: "room", Epoch: "f1", Revision: 2}), wire.RemAlready)
	wantStatuses(t, from.publish(h, pub("room", "f1", 3, 2)), wire.PubFenced)
	// The new incarnation republishes with its MovedFrom (every publication
	// carries it): just a count update.
	p := moved("t1", from.boot(), "f1")
	p.Revision, p.Connections = 2, 3
	wantStatuses(t, to.publish(h, p), wire.PubApplied)
	if l := h.list(0); l.Total != 1 || l.Results[0].ConnectedPlayers != 3 {
		t.Fatalf("list after handover: %+v", l)
	}
}
