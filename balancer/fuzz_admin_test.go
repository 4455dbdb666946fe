package balancer

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// FuzzParseBearer: whatever the Authorization header, a token comes back
// only from a "Bearer " header and is a valid secret that the header ends
// with.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"", "Bearer x", "bearer   abc", "Bearer", "Basic abc", "Bearer a b", "BEARER \x00", "Bearer " + strings.Repeat("k", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := parseBearer(h)
		if !ok {
			if tok != "" {
				t.Fatal("a token with !ok")
			}
			return
		}
		if !wire.ValidSecret(tok) || !strings.EqualFold(h[:7], "bearer ") || !strings.HasSuffix(h, tok) || len(h) > maxAuthHeaderLen {
			t.Fatalf("parseBearer(%q) = %q", h, tok)
		}
	})
}

// FuzzParseIfNoneMatch: a parsed header gives at most the tag bound, tags
// without quotes or controls, and the ETag etagOf makes is matched.
func FuzzParseIfNoneMatch(f *testing.F) {
	for _, s := range []string{"*", `"a"`, `W/"a", "b"`, `"a",`, `W/"`, `"a" "b"`, `, "a"`, `"\\"`, strings.Repeat(`"a",`, 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tags, star, ok := parseIfNoneMatch(v)
		if !ok {
			return
		}
		if star && len(tags) > 0 || !star && len(tags) == 0 || len(tags) > maxIfNoneMatchTags {
			t.Fatalf("%q: %v %v", v, tags, star)
		}
		for _, tag := range tags {
			if strings.ContainsAny(tag, "\"\\ \t\r\n") {
				t.Fatalf("%q: tag %q", v, tag)
			}
		}
		// Round trip: the tags joined again parse to the same.
		joined := make([]string, len(tags))
		for i, tag := range tags {
			joined[i] = `W/"` + tag + `"`
		}
		if !star {
			again, _, ok := parseIfNoneMatch(strings.Join(joined, ", "))
			if !ok || len(again) != len(tags) {
				t.Fatalf("%q: round trip %v", v, again)
			}
		}
	})
}

// FuzzAdminRequests sends what an operator's tool controls (method, path
// with query, body) to the /v1 surface, in process, with the right key and
// one relay registered: every answer is purrfly JSON, never a 500; a room
// page holds at most its limit; a reservation answers the room it names.
func FuzzAdminRequests(f *testing.F) {
	for _, c := range [][3]string{
		{"GET", "/v1/stats", ""},
		{"GET", "/v1/stats/history", ""},
		{"GET", "/v1/instances", ""},
		{"GET", "/v1/instances/relay-boot/rooms?limit=2&after=a", ""},
		{"GET", "/v1/rooms?region=eu&label=tier:pro&phase=active&limit=10", ""},
		{"GET", "/v1/rooms?label=a&label=b:c,d:e&limit=-1", ""},
		{"GET", "/v1/rooms?x=1", ""},
		{"POST", "/v1/rooms", `{"name":"m1","allocationId":"a1","region":"eu"}`},
		{"POST", "/v1/rooms", `{"name":"m2","allocationId":"a2","labels":{"tier":"pro"},"strategy":"most","instance":"relay-boot"}`},
		{"POST", "/v1/rooms", `{"name":"..","allocationId":"a3"}`},
		{"GET", "/v1/rooms/m1", ""},
		{"DELETE", "/v1/rooms/m1", ""},
		{"POST", "/v1/instances/relay-boot/drain", ""},
		{"POST", "/v1/instances/relay-boot/undrain", ""},
		{"GET", "/v1/nope", ""},
	} {
		f.Add(c[0], c[1], c[2])
	}
	s, _ := newFuzzBalancerWith(f, func(o *Options) { o.AdminKeys = []string{adminKeyA} })
	h := s.Handler()
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if !requestLine(method, target) || !strings.HasPrefix(target, "/v1/") || strings.HasPrefix(target, wire.PathEvents) ||
			method == http.MethodOptions || method == http.MethodHead {
			return
		}
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminKeyA)
		status, out := serveFuzz(t, h, req)
		if status != http.StatusOK || method != http.MethodGet && method != http.MethodPost {
			return
		}
		switch {
		case req.URL.Path == wire.PathRooms && method == http.MethodGet:
			var page wire.RoomsResponse
			if err := json.Unmarshal(out, &page); err != nil || page.Total < len(page.Rooms) || len(page.Rooms) > 10000 {
				t.Fatalf("rooms page: %s", out)
			}
		case req.URL.Path == wire.PathRooms:
			var in wire.ReserveRequest
			var res wire.Reservation
			if json.Unmarshal([]byte(body), &in) != nil || json.Unmarshal(out, &res) != nil || res.Room.Name != in.Name ||
				res.AllocationID != in.AllocationID || res.Host.Validate() != nil {
				t.Fatalf("reservation of %s: %s", body, out)
			}
		}
	})
}
