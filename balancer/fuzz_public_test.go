package balancer

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// FuzzPublicRequests sends what a PurrNet client controls (method, path
// with query, and the values of the headers the public API reads) to the
// balancer, in process, with one relay registered. Whatever they hold, the
// answer is purrfly JSON, never a 500; an allocation or a join answers a
// capability PurrNet accepts, on the registered relay's host; a list page
// holds at most wire.ListPageSize rooms.
func FuzzPublicRequests(f *testing.F) {
	f.Add("POST", "/allocate_ws", "room-1", "eu", "alloc-1", "")
	f.Add("GET", "/allocate_ws", "legacy room", "us", "", "")
	f.Add("POST", "/allocate_ws?labels=tier:pro&strategy=random", "room-2", "eu", "alloc-2", "")
	f.Add("POST", "/allocate_ws?labels=tier&strategy=most", "room-3", "eu", "alloc-3", "")
	f.Add("POST", "/allocate_ws", "x", "eu", "", "")
	f.Add("GET", "/join", "room-1", "", "", "")
	f.Add("GET", "/join", "nope", "", "", "")
	f.Add("GET", "/list?page=0", "", "", "", "")
	f.Add("GET", "/list?page=-1", "", "", "", "")
	f.Add("GET", "/list?page=99999999999999999999", "", "", "", "")
	f.Add("GET", "/servers", "", "", "", "")
	f.Add("GET", "/getTotalConnections", "", "", "", "")
	f.Add("GET", "/migration/current", "room-1", "", "", "client-secret")
	f.Add("POST", "/migration/claim", "room-1", "", "c1", "client-secret")
	f.Add("OPTIONS", "/join", "", "", "", "")
	f.Add("DELETE", "/join", "", "", "", "")
	f.Add("GET", "/../ping", "", "", "", "")
	f.Add("GET", "/internal/v2/register", "", "", "", "")
	s, _ := newFuzzBalancer(f)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, method, target, name, region, id, secret string) {
		if !requestLine(method, target) || strings.HasPrefix(target, "/metrics") {
			return
		}
		req := httptest.NewRequest(method, target, nil)
		for k, v := range map[string]string{wire.HeaderName: name, wire.HeaderRegion: region, wire.HeaderAllocationID: id,
			wire.HeaderMigrationClaimID: id, wire.HeaderMigrationSecret: secret, wire.HeaderIncarnation: region,
			wire.HeaderExpectedGen: "0", wire.HeaderPromotedPlayerID: "7"} {
			if v != "" {
				req.Header.Set(k, v) // canonical, as net/http files what PurrNet sends
			}
		}
		if method == http.MethodOptions {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusNoContent {
				t.Fatalf("preflight answered %d", w.Code)
			}
			return
		}
		status, out := serveFuzz(t, h, req)
		if status != http.StatusOK || method == http.MethodHead {
			return
		}
		switch req.URL.Path {
		case "/allocate_ws", "/join":
			var c wire.Capability
			if err := json.Unmarshal(out, &c); err != nil || c.Validate() != nil || c.Host != fuzzRelayInfo.Host {
				t.Fatalf("%s %s for %q: %s", method, target, name, out)
			}
		case "/list":
			var l wire.ListResponse
			if err := json.Unmarshal(out, &l); err != nil || len(l.Results) > wire.ListPageSize || l.Total < len(l.Results) {
				t.Fatalf("list: %s", out)
			}
		}
	})
}

// requestLine reports whether net/http would parse the request line
// "method target" (httptest.NewRequest panics otherwise): a token method
// and an origin-form target of visible ASCII, without '#' or '%'.
func requestLine(method, target string) bool {
	if method == "" || !strings.HasPrefix(target, "/") {
		return false
	}
	for _, c := range []byte(method) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	for _, c := range []byte(target) {
		if c <= ' ' || c >= 0x7f || c == '#' || c == '%' {
			return false
		}
	}
	return true
}
