package core

import (
	"encoding/binary"
	"testing"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// FuzzCoreFrames feeds arbitrary packets from a room's host and client to
// the routing core, in every pairing of WebSocket and UDP framing: nothing
// panics, a malformed packet is dropped (the sender stays in the room),
// and whatever reaches the host is a well-formed relay -> host packet.
func FuzzCoreFrames(f *testing.F) {
	f.Add(uint8(0), []byte{1, 2, 0, 0, 0, 2, 'h', 'i'}, []byte{2, 'y', 'o'})
	f.Add(uint8(3), []byte{2, 2, 0, 0, 0}, []byte{4})
	f.Add(uint8(1), []byte{0}, []byte{9, 9, 9})
	f.Add(uint8(2), []byte{1, 0xff, 0xff, 0xff, 0x7f, 4}, []byte{})
	f.Fuzz(coreFramesBody(f))
}

// coreFramesBody builds FuzzCoreFrames' body (and its rooms, on tb).
func coreFramesBody(tb testing.TB) func(t *testing.T, which uint8, fromHost, fromClient []byte) {
	tb.Helper()
	c := testCore(tb, clock.Real{})
	framings := [4][2]bool{{false, false}, {true, true}, {false, true}, {true, false}} // UDP framing: host, client
	rooms := make([]*coreRoom, 4)
	for i, fr := range framings {
		rooms[i] = newCoreRoomFramed(tb, c, "fuzz-"+itoa(i), fr[0], fr[1])
	}
	return func(t *testing.T, which uint8, fromHost, fromClient []byte) {
		cr := rooms[which%4]
		// A SEND_ONE or KICK for "the client" is aimed at the real one
		// half of the time, so the routing itself is exercised.
		if len(fromHost) >= 5 && fromHost[0] != 0 && which&4 != 0 {
			binary.LittleEndian.PutUint32(fromHost[1:], uint32(cr.client.id))
		}
		cr.deliver(cr.host, fromHost)
		cr.deliver(cr.client, fromClient)
		cr.batch = cr.host.TakeBatch(cr.batch[:0])
		for i, b := range cr.batch {
			if _, err := wire.ParseToHostPacket(b.Frame()); err != nil {
				t.Fatalf("the host got a malformed packet %x: %v", b.Frame(), err)
			}
			buf.Put(b)
			cr.batch[i] = nil
		}
		cr.drain(cr.client)
		if cr.host.role != RoleHost {
			t.Fatal("the host lost its role")
		}
		if cr.client.closing.Load() {
			// A kick ends the client: a new one joins for the next input.
			c.Leave(cr.client)
			*cr = *newCoreRoomFramed(t, c, "fuzz-"+itoa(int(which%4))+"-"+itoa(int(cr.client.id)), framings[which%4][0], framings[which%4][1])
		}
	}
}
