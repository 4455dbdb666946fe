package litenet

import (
	"encoding/binary"
	"runtime"
	"testing"
)

// heapLive is the live heap after two collections (the pools' victim
// caches dropped).
func heapLive() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// worstFragments sends the reassembly's worst pattern, as real datagrams:
// 64 groups of 255 one-byte ReliableUnordered fragments each, never the
// last part, packed many to a Merged datagram. It returns the datagrams
// sent.
func worstFragments(raw *rawConn) int {
	var d []byte
	n, seq := 0, 0
	flush := func() {
		if len(d) > 1 {
			raw.send(d)
			n++
		}
		d = []byte{byte(PropMerged)}
	}
	flush()
	for g := range maxFragGroups {
		for part := range maxFragments - 1 {
			f := fragment(ReliableUnordered, seq%maxSequence, uint16(g+1), uint16(part), maxFragments, []byte{1})
			seq++
			if len(d)+2+len(f) > MTU {
				flush()
			}
			d = binary.LittleEndian.AppendUint16(d, uint16(len(f)))
			d = append(d, f...)
		}
	}
	flush()
	return n
}

// Reassembly counts what it holds on the heap: under the worst pattern a
// peer holds no more than its budget, before and after authentication
// (each part a pooled buffer, a pkt and a slot, each group its struct and
// slice: one-byte parts are not free); before authentication the first
// group's parts pass it and end the peer (ReasonTooBig). Measured on the
// live heap.
func TestReassemblyHeapUnderTheWorstPattern(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory would be measured too")
	}
	for _, c := range []struct {
		name      string
		confirmed bool
		bound     int
	}{
		{"authenticated", true, 3 * messageCost(DefaultMaxMessage)},
		{"before authentication", false, messageCost(unconfirmedFragMessage)},
	} {
		t.Run(c.name, func(t *testing.T) {
			const peers = 8
			srv := newRecorder(false)
			srv.noConfirm.Store(!c.confirmed)
			e := listen(t, Config{Handler: srv})
			var raws []*rawConn
			for i := range peers {
				raw, _ := connectRaw(t, e, srv, int64(10+i))
				raws = append(raws, raw)
			}
			settle(t, e)
			before := heapLive()
			in := e.Stats().Datagrams
			for _, raw := range raws {
				in += uint64(worstFragments(raw))
			}
			waitDatagramsIn(t, e, in)
			settle(t, e)
			held, ended := 0, 0
			for _, p := range e.peers.all() {
				p.mu.Lock()
				if p.state == stateShutdown || p.state == stateGone {
					ended++
				}
				if p.fragCost > c.bound {
					t.Errorf("a peer holds %d in reassembly, bound %d", p.fragCost, c.bound)
				}
				held += len(p.frags)
				p.mu.Unlock()
			}
			grown := int(heapLive()) - int(before)
			t.Logf("%s: %d groups held by %d peers (%d ended); live heap grew %d bytes, %d a peer (bound %d)",
				c.name, held, peers, ended, grown, grown/peers, c.bound)
			if c.confirmed && held == 0 {
				t.Fatal("nothing was held: the pattern did not reach reassembly")
			}
			if !c.confirmed && ended == 0 && held == 0 {
				t.Fatal("nothing was held, no peer ended: the pattern did not reach reassembly")
			}
			if grown/peers > c.bound+c.bound/4 {
				t.Fatalf("the live heap grew %d bytes a peer under the worst pattern, bound %d", grown/peers, c.bound)
			}
		})
	}
}
