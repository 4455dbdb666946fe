package balancer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// pageFleet is a harness with two relays, eu (labelled tier=pro) and us,
// holding n rooms between them (waiting, active and vacant ones), and
// each room's relay and phase.
func pageFleet(t *testing.T, n int) (*harness, map[string][2]string, *fakeRelay, *fakeRelay) {
	t.Helper()
	h, _ := adminHarness(t, nil, guardQuiet)
	eu, us := newFakeRelay(t, "eu"), newFakeRelay(t, "us")
	eu.set(func(f *fakeRelay) { f.info.Labels = map[string]string{"tier": "pro"} })
	eu.register(h)
	us.register(h)
	want := map[string][2]string{}
	var batch [2][]wire.Publication
	flush := func() {
		for i, r := range []*fakeRelay{eu, us} {
			if len(batch[i]) > 0 {
				r.publish(h, batch[i]...)
				batch[i] = nil
			}
		}
	}
	for i := range n {
		name := fmt.Sprintf("room-%05d", (i*7919)%n) // not in name order
		p := pub(name, "e1", 1, i%3)
		phase := []string{wire.RoomWaiting, wire.RoomActive, wire.RoomActive}[i%3]
		if i%5 == 0 {
			p.Vacant, phase = true, wire.RoomVacant
		}
		which := i % 2
		batch[which] = append(batch[which], p)
		want[name] = [2]string{[]string{"eu", "us"}[which], phase}
		if len(batch[which]) == 1000 {
			flush()
		}
	}
	flush()
	return h, want, eu, us
}

// getPage is one GET of path (with the admin key): status, the page, the ETag.
func getPage(t *testing.T, h *harness, path string, hdr map[string]string) (int, wire.RoomsResponse, string) {
	t.Helper()
	all := bearer(adminKeyA)
	for k, v := range hdr {
		all[k] = v
	}
	st, body, resp := h.do(http.MethodGet, path, all, nil)
	var page wire.RoomsResponse
	if st == http.StatusOK {
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
	}
	return st, page, resp.Get("ETag")
}

// TestRoomPagesMatchTheFleet: paged with any filter and limit, following
// next, GET /v1/rooms lists exactly the rooms that match, in name order,
// and every page says their total; /v1/instances/{id}/rooms lists that
// relay's; GET /list's pages are the live rooms in name order.
func TestRoomPagesMatchTheFleet(t *testing.T) {
	const n = 2500
	h, want, eu, _ := pageFleet(t, n)
	for _, tc := range []struct {
		query string
		match func(region, phase string) bool
	}{
		{"", func(string, string) bool { return true }},
		{"region=EU", func(r, _ string) bool { return r == "eu" }},
		{"label=tier:pro", func(r, _ string) bool { return r == "eu" }},
		{"instance=" + url.QueryEscape(eu.boot()), func(r, _ string) bool { return r == "eu" }},
		{"phase=vacant", func(_, p string) bool { return p == wire.RoomVacant }},
		{"phase=waiting&region=us", func(r, p string) bool { return r == "us" && p == wire.RoomWaiting }},
		{"phase=active", func(_, p string) bool { return p == wire.RoomActive }},
	} {
		var expect []string
		for name, rp := range want {
			if tc.match(rp[0], rp[1]) {
				expect = append(expect, name)
			}
		}
		slices.Sort(expect)
		for _, limit := range []int{1, 7, 1000, 10000} {
			if limit == 1 && len(expect) > 300 {
				continue // a page a room: long enough with the small lists
			}
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				q := tc.query + "&limit=" + strconv.Itoa(limit) + "&after=" + url.QueryEscape(after)
				st, page, _ := getPage(t, h, wire.PathRooms+"?"+strings.TrimPrefix(q, "&"), nil)
				if st != http.StatusOK || page.Total != len(expect) || len(page.Rooms) > limit {
					t.Fatalf("%s limit %d: %d, %d rooms of total %d, want total %d", tc.query, limit, st, len(page.Rooms), page.Total, len(expect))
				}
				for _, rm := range page.Rooms {
					got = append(got, rm.Name)
					if rp := want[rm.Name]; rm.Phase != rp[1] || !strings.EqualFold(rm.Region, rp[0]) {
						t.Fatalf("%s: room %+v, want region %s phase %s", tc.query, rm, rp[0], rp[1])
					}
				}
				if page.Next == "" {
					break
				}
				after = page.Next
				if pages > n {
					t.Fatalf("%s limit %d: paging does not end", tc.query, limit)
				}
			}
			if !slices.Equal(got, expect) {
				t.Fatalf("%s limit %d: %d rooms listed, want %d (first %v, want %v)", tc.query, limit, len(got), len(expect), got[:min(3, len(got))], expect[:min(3, len(expect))])
			}
		}
	}
	var euRooms []string
	for name, rp := range want {
		if rp[0] == "eu" {
			euRooms = append(euRooms, name)
		}
	}
	slices.Sort(euRooms)
	st, page, _ := getPage(t, h, fmt.Sprintf(wire.PathInstanceRoomsFmt, eu.boot())+"?limit=10000", nil)
	if st != http.StatusOK || page.Total != len(euRooms) || len(page.Rooms) != len(euRooms) || page.Next != "" {
		t.Fatalf("an instance's rooms: %d, %d of %d, next %q; want all %d", st, len(page.Rooms), page.Total, page.Next, len(euRooms))
	}
	all := slices.Sorted(func(yield func(string) bool) {
		for name := range want {
			if !yield(name) {
				return
			}
		}
	})
	for p := 0; p*wire.ListPageSize < n+wire.ListPageSize; p++ {
		l := h.list(p)
		end := min((p+1)*wire.ListPageSize, n)
		var names []string
		for _, r := range l.Results {
			names = append(names, r.Name)
		}
		if l.Total != n || (p*wire.ListPageSize < n && !slices.Equal(names, all[p*wire.ListPageSize:end])) ||
			(p*wire.ListPageSize >= n && len(names) != 0) {
			t.Fatalf("/list page %d: %d results of total %d", p, len(names), l.Total)
		}
	}
	if l := h.list(1 << 40); len(l.Results) != 0 || l.Total != n {
		t.Fatalf("/list far past the end: %+v", l)
	}
}

// TestRoomPageETag: a page's ETag answers 304 to a client that holds it;
// a change to a room on the page, or to the total, gives another; a change
// to a room elsewhere in the fleet keeps it.
func TestRoomPageETag(t *testing.T) {
	h, _, eu, us := pageFleet(t, 200)
	path := wire.PathRooms + "?limit=10&after=room-00100"
	st, page, etag := getPage(t, h, path, nil)
	if st != http.StatusOK || etag == "" || len(page.Rooms) != 10 {
		t.Fatalf("page: %d, %d rooms, ETag %q", st, len(page.Rooms), etag)
	}
	if st, _, _ := getPage(t, h, path, map[string]string{"If-None-Match": etag}); st != http.StatusNotModified {
		t.Fatalf("with its ETag: %d, want 304", st)
	}
	// A count update of a room on another page: the same ETag.
	far := pub("room-00010", "e1", 5, 9)
	owner := eu
	if st := owner.publish(h, far)[0]; st != wire.PubApplied {
		owner = us
		wantStatuses(t, owner.publish(h, far), wire.PubApplied)
	}
	if st, _, _ := getPage(t, h, path, map[string]string{"If-None-Match": etag}); st != http.StatusNotModified {
		t.Fatalf("after a change on another page: %d, want 304", st)
	}
	// A count update of a room on this page: another ETag.
	on := pub(page.Rooms[3].Name, "e1", 5, 9)
	if st := eu.publish(h, on)[0]; st != wire.PubApplied {
		wantStatuses(t, us.publish(h, on), wire.PubApplied)
	}
	st, _, etag2 := getPage(t, h, path, map[string]string{"If-None-Match": etag})
	if st != http.StatusOK || etag2 == etag {
		t.Fatalf("after a change on the page: %d, ETag %q (was %q), want 200 and a new one", st, etag2, etag)
	}
}

// TestRoomPagePassesOverABoundedNumber: a filter that passes over many
// rooms to find few (here one waiting room after 12,000 active ones)
// stops after pageSkipBudget rooms and answers what it has, with next
// where it stopped; the next page goes on from there and finds it.
func TestRoomPagePassesOverABoundedNumber(t *testing.T) {
	h, _ := adminHarness(t, nil, guardQuiet)
	r := newFakeRelay(t, "eu")
	r.register(h)
	const n = 12000
	for start := 0; start < n; start += 1000 {
		var pubs []wire.Publication
		for i := start; i < start+1000; i++ {
			pubs = append(pubs, pub(fmt.Sprintf("active-%05d", i), "e1", 1, 2))
		}
		r.publish(h, pubs...)
	}
	r.publish(h, pub("zz-waiting", "e1", 1, 0))
	st, page, _ := getPage(t, h, wire.PathRooms+"?phase=waiting&limit=1", nil)
	if st != http.StatusOK || len(page.Rooms) != 0 || page.Total != 1 || page.Next == "" {
		t.Fatalf("first page: %d, %d rooms of %d, next %q; want none yet, total 1, and where it stopped", st, len(page.Rooms), page.Total, page.Next)
	}
	if page.Next != fmt.Sprintf("active-%05d", pageSkipBudget(1)-1) {
		t.Fatalf("stopped at %q, want after %d rooms", page.Next, pageSkipBudget(1))
	}
	st, page, _ = getPage(t, h, wire.PathRooms+"?phase=waiting&limit=1&after="+page.Next, nil)
	if st != http.StatusOK || len(page.Rooms) != 1 || page.Rooms[0].Name != "zz-waiting" || page.Next != "" {
		t.Fatalf("second page: %d %+v", st, page)
	}
}

// TestRoomPageCostsThePage: serving one page of 100 rooms (200 or 304)
// allocates the same at 1,000 rooms as at 20,000: the page is read from
// the index, not from a sorted copy of the fleet (which allocated about
// 60 bytes a room, 6 MB a request at 100,000 rooms).
func TestRoomPageCostsThePage(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	cost := func(rooms int) (ok, notModified float64) {
		s, f := newMemSetup(t)
		fillRooms(t, s, f, rooms)
		h, key := s.Handler(), s.GeneratedAdminKey()
		path := "/v1/rooms?limit=100&after=" + benchRoomName(rooms/2)
		etag := adminGet(h, key, path, nil).Header().Get("ETag")
		bytes := func(hdr map[string]string, want int) float64 {
			var a, b runtime.MemStats
			runtime.ReadMemStats(&a)
			for range 20 {
				if rec := adminGet(h, key, path, hdr); rec.Code != want {
					t.Fatalf("%d rooms: %d, want %d", rooms, rec.Code, want)
				}
			}
			runtime.ReadMemStats(&b)
			return float64(b.TotalAlloc-a.TotalAlloc) / 20
		}
		return bytes(nil, http.StatusOK), bytes(map[string]string{"If-None-Match": etag}, http.StatusNotModified)
	}
	smallOK, small304 := cost(1000)
	bigOK, big304 := cost(20000)
	t.Logf("bytes a request, 1,000 / 20,000 rooms: 200 %.0f / %.0f, 304 %.0f / %.0f", smallOK, bigOK, small304, big304)
	if bigOK > 1.5*smallOK+4096 || big304 > 1.5*small304+4096 {
		t.Fatalf("a page costs more with the fleet: 200 %.0f -> %.0f bytes, 304 %.0f -> %.0f", smallOK, bigOK, small304, big304)
	}
	if big304 > bigOK/2 {
		t.Fatalf("a 304 allocates %.0f bytes, a 200 %.0f: want it to cost less", big304, bigOK)
	}
}
