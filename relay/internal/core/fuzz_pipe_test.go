package core

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// FuzzCorePipe feeds arbitrary packets from a pipe peer to the routing
// core, over WebSocket and UDP framing: nothing panics, the sender stays a
// pipe, and a packet either is dropped or reaches exactly the pipe it
// names (itself, or one on the other transport, included) as
// [sender:4][data], its data byte for byte (sent with the method it
// carried over UDP, ReliableOrdered over WebSocket).
func FuzzCorePipe(f *testing.F) {
	f.Add(uint8(0), []byte{2, 0, 0, 0, 'h', 'i'})
	f.Add(uint8(1), []byte{byte(wire.Unreliable), 2, 0, 0, 0, 'h', 'i'})
	f.Add(uint8(2), []byte{0, 0, 0, 0, 'x'})
	f.Add(uint8(3), []byte{9, 0, 0, 0, 0, 'x'})
	f.Add(uint8(2), []byte{1, 2, 3})
	f.Add(uint8(3), []byte{byte(wire.ReliableOrdered), 0, 0, 0, 0})
	c := testCore(f, clock.Real{})
	cr := &coreRoom{core: c, udp: map[*Conn]bool{}}
	var pipes [2][2]*Conn // [framing: WebSocket, UDP][sender, receiver]
	for i := range pipes {
		for j := range pipes[i] {
			p := c.NewConn(nil)
			cr.udp[p] = i == 1
			cr.deliver(p, []byte(`{"pipe":true}`))
			if p.role != RolePipe || cr.drain(p) != 1 {
				f.Fatal("pipe authentication failed")
			}
			pipes[i][j] = p
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		if len(b) > wire.MaxMessageSize {
			return // the transports refuse larger messages
		}
		udp := which&1 != 0
		from, to := pipes[which&1][0], pipes[which&1][1]
		head := 0
		if udp {
			head = 1
		}
		// Half of the time the packet names the real peer.
		if which&2 != 0 && len(b) >= head+4 {
			binary.LittleEndian.PutUint32(b[head:], uint32(to.id))
		}
		cr.deliver(from, b)
		if from.role != RolePipe || from.closing.Load() || to.closing.Load() {
			t.Fatal("a pipe lost its role or was closed")
		}
		// Any pipe may send to any other, over either transport, or to
		// itself: the packet reaches the one it names.
		var got *buf.Buf
		for _, p := range []*Conn{pipes[0][0], pipes[0][1], pipes[1][0], pipes[1][1]} {
			cr.batch = p.TakeBatch(cr.batch[:0])
			for i, x := range cr.batch {
				if got != nil || len(b) < head+5 || wire.ConnID(binary.LittleEndian.Uint32(b[head:])) != p.id {
					t.Fatalf("%x reached pipe %d", b, p.id)
				}
				got = x
				cr.batch[i] = nil
			}
		}
		if got == nil {
			return
		}
		defer buf.Put(got)
		want := wire.AppendPipe(nil, from.id, b[head+4:])
		if !bytes.Equal(got.Frame(), want) {
			t.Fatalf("peer got %x, want %x", got.Frame(), want)
		}
		if udp && (got.Method != wire.Delivery(b[0]) || !got.Method.Valid()) || !udp && got.Method != wire.ReliableOrdered {
			t.Fatalf("sent with method %d from %x", got.Method, b)
		}
	})
}
