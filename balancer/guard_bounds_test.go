package balancer

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// guardStr is a string of n bytes.
func guardStr(n int) string { return strings.Repeat("x", n) }

// guardURL is an http base URL of exactly n bytes (n >= 20).
func guardURL(n int) string {
	const base = "http://127.0.0.1:1/"
	return base + guardStr(n-len(base))
}

// TestRelayInfoBounds: a heartbeat's relay info is accepted up to each of
// its bounds and refused as bad_request one past it: boot id 128 bytes,
// host 253 (a DNS name), region 64, the websocket and UDP v2 ports
// 1..65535, the legacy UDP port 0..65535 (0: none), machine id, image and
// version 256 bytes each, endpoint URLs 512 bytes (the public endpoint is
// not probed, so it shows the URL bound on its own).
func TestRelayInfoBounds(t *testing.T) {
	h := newHarness(t, nil)
	for _, c := range []struct {
		what   string
		change func(*wire.RelayInfo)
		ok     bool
	}{
		{"boot id of 128 bytes", func(i *wire.RelayInfo) { i.BootID = guardStr(128) }, true},
		{"boot id of 129 bytes", func(i *wire.RelayInfo) { i.BootID = guardStr(129) }, false},
		{"host of 253 bytes", func(i *wire.RelayInfo) { i.Host = guardStr(253) }, true},
		{"host of 254 bytes", func(i *wire.RelayInfo) { i.Host = guardStr(254) }, false},
		{"region of 64 bytes", func(i *wire.RelayInfo) { i.Region = guardStr(wire.MaxRegionLen) }, true},
		{"region of 65 bytes", func(i *wire.RelayInfo) { i.Region = guardStr(wire.MaxRegionLen + 1) }, false},
		{"port 1", func(i *wire.RelayInfo) { i.Port = 1 }, true},
		{"port 0", func(i *wire.RelayInfo) { i.Port = 0 }, false},
		{"port 65535", func(i *wire.RelayInfo) { i.Port = 65535 }, true},
		{"port 65536", func(i *wire.RelayInfo) { i.Port = 65536 }, false},
		{"UDP v2 port 1", func(i *wire.RelayInfo) { i.UDPPortV2 = 1 }, true},
		{"UDP v2 port 0", func(i *wire.RelayInfo) { i.UDPPortV2 = 0 }, false},
		{"UDP v2 port 65535", func(i *wire.RelayInfo) { i.UDPPortV2 = 65535 }, true},
		{"UDP v2 port 65536", func(i *wire.RelayInfo) { i.UDPPortV2 = 65536 }, false},
		{"UDP port 0", func(i *wire.RelayInfo) { i.UDPPort = 0 }, true},
		{"UDP port -1", func(i *wire.RelayInfo) { i.UDPPort = -1 }, false},
		{"UDP port 65535", func(i *wire.RelayInfo) { i.UDPPort = 65535 }, true},
		{"UDP port 65536", func(i *wire.RelayInfo) { i.UDPPort = 65536 }, false},
		{"machine id of 256 bytes", func(i *wire.RelayInfo) { i.MachineID = guardStr(256) }, true},
		{"machine id of 257 bytes", func(i *wire.RelayInfo) { i.MachineID = guardStr(257) }, false},
		{"image of 256 bytes", func(i *wire.RelayInfo) { i.ImageRef = guardStr(256) }, true},
		{"image of 257 bytes", func(i *wire.RelayInfo) { i.ImageRef = guardStr(257) }, false},
		{"version of 256 bytes", func(i *wire.RelayInfo) { i.Version = guardStr(256) }, true},
		{"version of 257 bytes", func(i *wire.RelayInfo) { i.Version = guardStr(257) }, false},
		{"public endpoint of 512 bytes", func(i *wire.RelayInfo) { i.PublicEndpoint = guardURL(512) }, true},
		{"public endpoint of 513 bytes", func(i *wire.RelayInfo) { i.PublicEndpoint = guardURL(513) }, false},
		{"endpoint of 513 bytes", func(i *wire.RelayInfo) { i.Endpoint = guardURL(513) }, false},
	} {
		r := newFakeRelay(t, "eu")
		var info wire.RelayInfo
		r.set(func(f *fakeRelay) {
			c.change(&f.info) // its /ping reports f.info.BootID
			info = f.info
		})
		_, err := r.registerAs(h, info)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: refused: %s %s", c.what, err.Code, err.Message)
		case !c.ok && (err == nil || err.Code != wire.ErrBadRequest.Code):
			t.Errorf("%s: got %v, want bad_request", c.what, err)
		}
	}
}

// TestRemovalBounds: an unregister entry names a room of 1 to 128 bytes
// and an epoch of 1 to 128 bytes; at those lengths it is applied, one byte
// more and the request is a bad_request.
func TestRemovalBounds(t *testing.T) {
	h := newHarness(t, nil)
	a := newFakeRelay(t, "eu")
	a.register(h)
	name, epoch := guardStr(wire.MaxSessionIDLen), guardStr(128)
	wantStatuses(t, a.publish(h, pub(name, "e1", 1, 0), pub("room", epoch, 1, 0)), wire.PubApplied, wire.PubApplied)
	wantStatuses(t, a.unregister(h, wire.Removal{Name: name, Epoch: "e1", Revision: 1}, wire.Removal{Name: "room", Epoch: epoch, Revision: 1}),
		wire.RemApplied, wire.RemApplied)
	for _, n := range []string{name, "room"} {
		if _, err := h.join(n); err == nil {
			t.Fatalf("room of %d bytes still joinable after its removal", len(n))
		}
	}
	for _, rm := range []wire.Removal{{Name: guardStr(wire.MaxSessionIDLen + 1), Epoch: "e1", Revision: 1}, {Name: "room", Epoch: guardStr(129), Revision: 1}} {
		var resp wire.UnregisterResponse
		err := a.post(h, wire.PathUnregister, wire.UnregisterRequest{BootID: a.boot(), Endpoint: a.info.Endpoint, Rooms: []wire.Removal{rm}}, &resp)
		wantCode(t, err, wire.ErrBadRequest.Code)
	}
}

// TestRoomLocationNameBound: the room location route (multi-machine apps)
// takes room names of 1 to 128 bytes, like every other room route; one
// byte more is a bad_request.
func TestRoomLocationNameBound(t *testing.T) {
	h := newHarness(t, nil)
	a := newFakeRelay(t, "eu")
	a.register(h)
	name := guardStr(wire.MaxSessionIDLen)
	wantStatuses(t, a.publish(h, pub(name, "e1", 1, 4)), wire.PubApplied)
	locate := func(name string) (wire.RoomLocation, *wire.Error) {
		var loc wire.RoomLocation
		st, body, _ := h.do(http.MethodGet, wire.PathRoomLocation+"?name="+url.QueryEscape(name), map[string]string{wire.HeaderInternalSecret: testSecret}, nil)
		return loc, decodeAnswer(t, st, body, &loc)
	}
	loc, err := locate(name)
	noErr(t, err)
	if loc.Name != name || loc.BootID != a.boot() || loc.Connections != 4 {
		t.Fatalf("location of a 128-byte room: %+v", loc)
	}
	_, err = locate(guardStr(wire.MaxSessionIDLen + 1))
	wantCode(t, err, wire.ErrBadRequest.Code)
}

// TestDrainIDBound: an operator drains a relay by its boot id, which may be
// 128 bytes long; a longer id is a bad_request, not an unknown instance.
func TestDrainIDBound(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.set(func(f *fakeRelay) { f.info.BootID = guardStr(128) })
	r.register(h)
	auth := map[string]string{"Authorization": "Bearer " + testSecret}
	st, body, _ := h.do(http.MethodPost, "/v1/instances/"+guardStr(128)+"/drain", auth, nil)
	var in wire.Instance
	noErr(t, decodeAnswer(t, st, body, &in))
	if in.Status != wire.InstanceDraining || in.BootID != guardStr(128) {
		t.Fatalf("drain by a 128-byte boot id answered %+v", in)
	}
	st, body, _ = h.do(http.MethodPost, "/v1/instances/"+guardStr(129)+"/drain", auth, nil)
	wantCode(t, decodeAnswer(t, st, body, nil), wire.ErrBadRequest.Code)
}

// TestOptionsBounds: New takes a listen port up to 65535 and a boot id of
// up to 128 bytes (the bound relays apply to the balancer boot they
// store), and refuses one more.
func TestOptionsBounds(t *testing.T) {
	for _, c := range []struct {
		what string
		opts Options
		ok   bool
	}{
		{"port 65535", Options{Secret: testSecret, Port: 65535}, true},
		{"port 65536", Options{Secret: testSecret, Port: 65536}, false},
		{"port 0", Options{Secret: testSecret, Port: 0}, true},
		{"port -1", Options{Secret: testSecret, Port: -1}, false},
		{"boot id of 128 bytes", Options{Secret: testSecret, BootID: guardStr(128)}, true},
		{"boot id of 129 bytes", Options{Secret: testSecret, BootID: guardStr(129)}, false},
	} {
		s, err := New(c.opts)
		if c.ok != (err == nil) {
			t.Errorf("%s: got error %v, want ok=%v", c.what, err, c.ok)
		}
		if err == nil && c.opts.BootID != "" && s.BootID() != c.opts.BootID {
			t.Errorf("%s: boot id %q", c.what, s.BootID())
		}
	}
}
