package core

import (
	"sync"
	"testing"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// coreRoom is a routing core with one room, its host and one client, and
// no transport: the test drains the queues itself. The conns in udp speak
// PurrNet's UDP framing: deliver takes their messages' methods out first,
// as the UDP transport does.
type coreRoom struct {
	core         *Core
	host, client *Conn
	batch        []*buf.Buf
	udp          map[*Conn]bool
}

func newCoreRoom(tb testing.TB) *coreRoom {
	tb.Helper()
	return newCoreRoomIn(tb, testCore(tb, clock.Real{}), "bench")
}

var parallelCore struct {
	once sync.Once
	c    *Core
}

// newCoreRoomNamed adds a room to one core shared by parallel benchmarks.
func newCoreRoomNamed(tb testing.TB, name string) *coreRoom {
	parallelCore.once.Do(func() {
		parallelCore.c = testCore(tb, clock.Real{})
	})
	return newCoreRoomIn(tb, parallelCore.c, name)
}

func newCoreRoomIn(tb testing.TB, c *Core, name string) *coreRoom {
	return newCoreRoomFramed(tb, c, name, false, false)
}

// newCoreRoomFramed is newCoreRoomIn with the host's and the client's
// framings (UDP when true).
func newCoreRoomFramed(tb testing.TB, c *Core, name string, hostUDP, clientUDP bool) *coreRoom {
	tb.Helper()
	a, err := c.Allocate(name, "id")
	if err != nil {
		tb.Fatal(err)
	}
	cr := &coreRoom{core: c, host: c.NewConn(nil), client: c.NewConn(nil)}
	// Only the UDP conns are entered: an empty map costs the benchmarks
	// no lookup.
	cr.udp = make(map[*Conn]bool)
	if hostUDP {
		cr.udp[cr.host] = true
	}
	if clientUDP {
		cr.udp[cr.client] = true
	}
	cr.deliver(cr.host, wire.Auth{RoomName: name, ClientSecret: a.HostSecret}.Marshal())
	cr.deliver(cr.client, wire.Auth{RoomName: name, ClientSecret: a.Pub.ClientSecret}.Marshal())
	cr.drain(cr.host)
	cr.drain(cr.client)
	if cr.host.role != RoleHost || cr.client.role != RoleClient {
		tb.Fatal("authentication failed")
	}
	return cr
}

// deliver hands msg to the core as a transport's reader would.
func (cr *coreRoom) deliver(from *Conn, msg []byte) {
	b := buf.Get(buf.Headroom + len(msg))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], msg)
	if len(cr.udp) != 0 && cr.udp[from] && !unframeUDP(cr.core, from, b) {
		return
	}
	cr.core.Handle(from, b)
}

// drain plays the writer: takes the queue and releases the frames,
// returning how many there were and the last one's bytes (copied into dst).
func (cr *coreRoom) drain(c *Conn) int {
	cr.batch = c.TakeBatch(cr.batch[:0])
	n := len(cr.batch)
	for i, b := range cr.batch {
		buf.Put(b)
		cr.batch[i] = nil
	}
	return n
}

func TestCoreRouting(t *testing.T) {
	cr := newCoreRoom(t)
	cr.deliver(cr.host, sendOne(cr.client.id, "abc"))
	cr.batch = cr.client.TakeBatch(cr.batch[:0])
	if len(cr.batch) != 1 || !equal(cr.batch[0].Frame(), "abc") {
		t.Fatalf("client queue %d", len(cr.batch))
	}
	buf.Put(cr.batch[0])
	cr.deliver(cr.client, []byte("xyz"))
	cr.batch = cr.host.TakeBatch(cr.batch[:0])
	pk, err := wire.ParseToHostPacket(cr.batch[0].Frame())
	if err != nil || pk.Type != wire.ToHostData || pk.IDs[0] != cr.client.id || !equal(pk.Payload, "xyz") {
		t.Fatalf("host got %v %v", pk, err)
	}
	buf.Put(cr.batch[0])
}

// TestForwardingAllocatesNothing asserts the hot path's budget: zero
// allocations per forwarded packet, both directions.
func TestForwardingAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	cr := newCoreRoom(t)
	toClient := sendOne(cr.client.id, string(make([]byte, 64)))
	toHost := make([]byte, 64)
	if n := testing.AllocsPerRun(1000, func() {
		cr.deliver(cr.host, toClient)
		cr.drain(cr.client)
	}); n != 0 {
		t.Errorf("SEND_ONE: %v allocations per packet", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		cr.deliver(cr.client, toHost)
		cr.drain(cr.host)
	}); n != 0 {
		t.Errorf("client packet: %v allocations per packet", n)
	}
}

var benchSizes = []struct {
	name string
	size int
}{{"64B", 64}, {"1KiB", 1024}, {"16KiB", 16 << 10}}

// BenchmarkForwardSendOne: a host SEND_ONE through the routing core to the
// client's queue and out of it (no network).
func BenchmarkForwardSendOne(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			cr := newCoreRoom(b)
			msg := sendOne(cr.client.id, string(make([]byte, sz.size)))
			b.SetBytes(int64(sz.size))
			b.ReportAllocs()
			for b.Loop() {
				cr.deliver(cr.host, msg)
				cr.drain(cr.client)
			}
		})
	}
}

// BenchmarkForwardClientPacket: a client packet through the routing core
// to the host's queue as [2][sender][payload] (no network).
func BenchmarkForwardClientPacket(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			cr := newCoreRoom(b)
			msg := make([]byte, sz.size)
			b.SetBytes(int64(sz.size))
			b.ReportAllocs()
			for b.Loop() {
				cr.deliver(cr.client, msg)
				cr.drain(cr.host)
			}
		})
	}
}

// BenchmarkForwardClientPacketParallel: many clients of many rooms
// forwarding at once, to show there is no global lock.
func BenchmarkForwardClientPacketParallel(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(64)
	b.RunParallel(func(pb *testing.PB) {
		cr := newCoreRoomNamed(b, randomHex(8))
		msg := make([]byte, 64)
		for pb.Next() {
			cr.deliver(cr.client, msg)
			cr.drain(cr.host)
		}
	})
}
