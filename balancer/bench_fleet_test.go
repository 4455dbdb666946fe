package balancer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// The fleet-sized reads (a /v1/rooms page, its 304, a /list page, an event
// diff after one allocation) at a fleet of rooms, through Handler() and an
// in-memory relay: what one of them costs should not grow with the fleet.

// memInternal sends one internal request of the in-memory relay f through
// s's handler and decodes the answer into out.
func memInternal(tb testing.TB, s *Server, path string, in, out any) {
	tb.Helper()
	body, _ := json.Marshal(in)
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			tb.Fatal(err)
		}
	}
}

// benchRoomName is the i-th room of a filled fleet (names sort as numbers).
func benchRoomName(i int) string { return fmt.Sprintf("room-%07d", i) }

// fillRooms publishes n rooms of the in-memory relay f, 1,000 a request.
func fillRooms(tb testing.TB, s *Server, f *fakeRelay, n int) {
	tb.Helper()
	for start := 0; start < n; start += 1000 {
		req := wire.PublishRequest{BootID: f.info.BootID, Endpoint: f.info.Endpoint}
		for i := start; i < min(start+1000, n); i++ {
			name := benchRoomName(i)
			req.Rooms = append(req.Rooms, wire.Publication{Name: name, Epoch: "e-" + name, Revision: 1,
				Connections: i % 3, ClientSecret: "client-secret-" + name, AllocationID: "id-" + name})
		}
		memInternal(tb, s, wire.PathPublish, req, nil)
	}
}

// adminGet serves one admin GET through h and returns the recorder.
func adminGet(h http.Handler, key, path string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// BenchmarkRoomsPage is one GET /v1/rooms page of 100 rooms from the middle
// of the fleet (200), the same with its ETag (304), and a GET /list page,
// at 10,000 and 100,000 rooms.
func BenchmarkRoomsPage(b *testing.B) {
	for _, rooms := range []int{10000, 100000} {
		s, f := newMemSetup(b)
		fillRooms(b, s, f, rooms)
		h, key := s.Handler(), s.GeneratedAdminKey()
		path := "/v1/rooms?limit=100&after=" + benchRoomName(rooms/2)
		b.Run(strconv.Itoa(rooms)+"/200", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if rec := adminGet(h, key, path, nil); rec.Code != http.StatusOK {
					b.Fatal(rec.Code, rec.Body)
				}
			}
		})
		etag := adminGet(h, key, path, nil).Header().Get("ETag")
		b.Run(strconv.Itoa(rooms)+"/304", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if rec := adminGet(h, key, path, map[string]string{"If-None-Match": etag}); rec.Code != http.StatusNotModified {
					b.Fatal(rec.Code, rec.Body)
				}
			}
		})
		list := "/list?page=" + strconv.Itoa(rooms/2/wire.ListPageSize)
		b.Run(strconv.Itoa(rooms)+"/list", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if rec := adminGet(h, key, list, nil); rec.Code != http.StatusOK {
					b.Fatal(rec.Code, rec.Body)
				}
			}
		})
	}
}

// BenchmarkEventSyncAfterAllocate is one allocation and the event diff
// that follows it while a stream is open, at 1,000 and 10,000 rooms.
func BenchmarkEventSyncAfterAllocate(b *testing.B) {
	for _, rooms := range []int{1000, 10000} {
		b.Run(strconv.Itoa(rooms), func(b *testing.B) {
			s, f := newMemSetup(b)
			fillRooms(b, s, f, rooms)
			h := s.Handler()
			sub, err := s.events.subscribe()
			if err != nil {
				b.Fatal(err)
			}
			defer s.events.unsubscribe(sub)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				allocateAndJoin(b, h, "new-"+strconv.Itoa(i))
				i++
				s.events.sync()
				for len(sub.ch) > 0 {
					<-sub.ch
				}
			}
		})
	}
}
