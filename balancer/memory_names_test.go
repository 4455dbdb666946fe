package balancer

import (
	"runtime"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// releasedNameBytes publishes n distinct rooms of the in-memory relay f,
// removes them all through its outbox, and answers what the balancer still
// holds for them, per name (the live heap after, less before).
func releasedNameBytes(tb testing.TB, s *Server, f *fakeRelay, n int) float64 {
	tb.Helper()
	before := liveHeap()
	fillRooms(tb, s, f, n)
	for start := 0; start < n; start += 1000 {
		req := wire.UnregisterRequest{BootID: f.info.BootID, Endpoint: f.info.Endpoint}
		for i := start; i < min(start+1000, n); i++ {
			name := benchRoomName(i)
			req.Rooms = append(req.Rooms, wire.Removal{Name: name, Epoch: "e-" + name, Revision: 1})
		}
		var resp wire.UnregisterResponse
		memInternal(tb, s, wire.PathUnregister, req, &resp)
		for _, r := range resp.Results {
			if r.Status != wire.RemApplied {
				tb.Fatalf("removal of %s: %s", r.Name, r.Status)
			}
		}
	}
	after := liveHeap()
	runtime.KeepAlive(s)
	return (float64(after) - float64(before)) / float64(n)
}

// maxReleasedNameBytes bounds what one released room name may keep on the
// heap while it is fenced (a tombstone and the name's release mark, each a
// hash and a time in the store's table and its queue).
const maxReleasedNameBytes = 160

// TestMemoryPerReleasedName: 50,000 rooms published and released keep at
// most maxReleasedNameBytes each on the heap (they kept about 700 bytes
// each, room entry, lease and a one-entry map of tombstones, for the
// whole horizon).
func TestMemoryPerReleasedName(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory is not the balancer's")
	}
	s, f := newMemSetup(t)
	per := releasedNameBytes(t, s, f, 50000)
	t.Logf("%.0f bytes of heap per released room name", per)
	if per > maxReleasedNameBytes {
		t.Fatalf("%.0f bytes of heap per released room name, want at most %d", per, maxReleasedNameBytes)
	}
}
