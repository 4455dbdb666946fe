package relay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// FuzzInternalRequests sends arbitrary internal requests (with the right
// secret) to the relay's HTTP handler, in process: the allocation's
// headers, the handover's JSON body, the migration calls' route snapshot
// and fields. Whatever they hold, the answer is purrfly JSON, never a 500:
// a success of the route's shape (an allocation of the room named in the
// header, by this boot), else an error with a code. Each input gets a
// fresh room: @room@, @client@, @host@, @epoch@, @rev@, @inc@ and @boot@
// stand for its name, credentials, epoch, revision, incarnation and the
// relay's boot id.
func FuzzInternalRequests(f *testing.F) {
	f.Add(uint8(0), "@room@", "eu", "alloc-1", []byte(nil))
	f.Add(uint8(4), "new room", "", "", []byte(nil))
	f.Add(uint8(0), "x\x01", "eu", "a", []byte(nil))
	f.Add(uint8(1), "", "", "", []byte(`{"name":"@room@","secret":"@host@","bootId":"asker"}`))
	f.Add(uint8(1), "", "", "", []byte(`{"name":"@room@","secret":"@client@","bootId":"asker"}`))
	f.Add(uint8(1), "", "", "", []byte(`{"name":"","bootId":"a"}`))
	for op := range 4 {
		f.Add(uint8(2|op<<2), "@room@", "@epoch@", "@rev@",
			[]byte("migration_secret: @host@\nmigration_claim_id: c1\nincarnation: @inc@\nexpected_generation: 0\npromoted_player_id: 7\nmigration_grant: g\nfencing_token: f"))
	}
	f.Add(uint8(2|2<<2), "@room@", "@epoch@", "@rev@",
		[]byte("migration_secret: @client@\nmigration_claim_id: c2\nincarnation: @inc@\nexpected_generation: 0\npromoted_player_id: 9"))
	f.Add(uint8(2), "@room@", "@epoch@", "99999999999999999999", []byte("migration_secret: @client@"))
	f.Add(uint8(3), "/ping", "", "", []byte(nil))
	f.Add(uint8(3), "/internal/v2/nothing", "", "", []byte(nil))

	const boot = "boot-fuzz"
	s, err := New(Options{Secret: testSecret, Logger: testLogger(), Metrics: prometheus.NewRegistry(),
		BootID: boot, BalancerURL: "http://balancer.invalid", MultiMachine: true, PublicHost: "relay.example"})
	if err != nil {
		f.Fatal(err)
	}
	s.advertisedWSPort, s.advertisedUDPPortV2 = 443, 7778 // as Start would
	// No failed-auth throttle: an input that overrides the secret would
	// otherwise leave every later one (all from httptest's one address)
	// answered 429 before its route runs. secret_throttle_test.go covers it.
	s.secretThrottle = limit.NewAuthThrottle(limit.Rate{}, nil, 0)
	h := s.mainHandler()
	c := s.core
	n := 0
	f.Fuzz(func(t *testing.T, route uint8, name, a, b string, body []byte) {
		n++
		room := "fuzz-" + strconv.Itoa(n)
		al, err := c.Allocate(room, "alloc-1")
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, r := range c.Rooms() {
				c.EndRoom(r, core.ReasonRoomGone)
			}
			s.reg.mu.Lock()
			clear(s.reg.outbox)
			clear(s.reg.dirty)
			s.reg.mu.Unlock()
		}()
		r := c.Room(room)
		rep := strings.NewReplacer("@room@", room, "@client@", al.Pub.ClientSecret, "@host@", al.HostSecret,
			"@epoch@", al.Pub.Epoch, "@rev@", strconv.FormatUint(al.Pub.Revision, 10), "@inc@", r.Incarnation(), "@boot@", boot)
		name, a, b, body = rep.Replace(name), rep.Replace(a), rep.Replace(b), []byte(rep.Replace(string(body)))

		var req *http.Request
		switch route % 4 {
		case 0:
			req = httptest.NewRequest(http.MethodPost, wire.PathRelayAllocate, nil)
			req.Header.Set(wire.HeaderName, name)
			req.Header.Set(wire.HeaderRegion, a)
			req.Header.Set(wire.HeaderAllocationID, b)
			if route&4 != 0 {
				req.Header.Set(wire.HeaderTargetBoot, boot)
			}
		case 1:
			req = httptest.NewRequest(http.MethodPost, wire.PathHandover, bytes.NewReader(body))
		case 2:
			op := wire.MigrationOp(route >> 2 % 4)
			req = httptest.NewRequest(op.Method(), op.RelayPath(), nil)
			req.Header.Set(wire.HeaderTargetBoot, boot)
			req.Header.Set(wire.HeaderName, name)
			req.Header.Set(wire.HeaderRoomEpoch, a)
			req.Header.Set(wire.HeaderRoomRevision, b)
			for line := range strings.SplitSeq(string(body), "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok {
					req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
				}
			}
		default:
			// A path net/http would parse (visible ASCII), not the upgrades.
			if !strings.HasPrefix(name, "/") || strings.ContainsFunc(name, func(c rune) bool { return c <= ' ' || c >= 0x7f || strings.ContainsRune("?#%", c) }) ||
				strings.HasPrefix(name, wire.PathForward) || name == "/" {
				return
			}
			req = httptest.NewRequest(http.MethodGet, name, nil)
		}
		wire.SetInternal(req.Header, testSecret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		res := w.Result()
		out := w.Body.Bytes()
		if ct := res.Header.Get("Content-Type"); ct != "application/json" || !json.Valid(out) {
			t.Fatalf("%s %s: %d %q %q", req.Method, req.URL.Path, res.StatusCode, ct, out)
		}
		if res.StatusCode == http.StatusInternalServerError {
			t.Fatalf("%s %s: 500 %s", req.Method, req.URL.Path, out)
		}
		if res.StatusCode != http.StatusOK {
			if e := wire.DecodeError(res.StatusCode, out); strings.HasPrefix(e.Code, "http_") {
				t.Fatalf("%s %s: %d is not a purrfly error: %s", req.Method, req.URL.Path, res.StatusCode, out)
			}
			return
		}
		if route%4 == 0 {
			var got wire.RelayAllocation
			if err := json.Unmarshal(out, &got); err != nil || got.Publication.Name != name || got.BootID != boot ||
				got.Capability.Validate() != nil || c.Room(name) == nil {
				t.Fatalf("allocation of %q answered %s (%v)", name, out, err)
			}
		}
	})
}
