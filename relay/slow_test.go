package relay

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// TestSlowReceiverDisconnected: one client stops reading while its host
// keeps sending to it. Its backlog passes the soft bound, it is
// disconnected once the backlog stays there past the deadline, and the
// disconnect is counted; meanwhile another client of the same room and
// another room lose nothing.
func TestSlowReceiverDisconnected(t *testing.T) {
	s := startRelay(t, Options{SlowReceiverTimeout: 200 * time.Millisecond})
	hs, cs := mustAllocate(t, s, "room")
	host := join(t, s, "room", hs)
	_ = join(t, s, "room", cs) // the slow one: never reads again
	slowID := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	fast := join(t, s, "room", cs)
	fastID := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	host2, client2, id2 := hostWithClient(t, s, "other")

	// The fast client reads everything, in order, on its own goroutine.
	type result struct {
		n   int
		err string
	}
	fastDone := make(chan result, 1)
	stop := make(chan int, 1)
	go func() {
		want, total := 0, -1
		for total < 0 || want < total {
			select {
			case total = <-stop:
				continue
			default:
			}
			ctx, cancel := contextWithTimeout(10 * time.Second)
			_, b, err := fast.WS.Read(ctx)
			cancel()
			if err != nil {
				fastDone <- result{want, "read: " + err.Error()}
				return
			}
			if got := int(binary.LittleEndian.Uint32(b)); got != want {
				fastDone <- result{want, "out of order or lost"}
				return
			}
			want++
		}
		fastDone <- result{want, ""}
	}()

	big := make([]byte, 32<<10)
	seq := make([]byte, 4)
	sent := 0
	deadline := time.Now().Add(20 * time.Second) // wall clock: bounds a load loop over real sockets
	forced := func() float64 {
		return disconnects(t, s, core.ReasonSlowReceiver) + disconnects(t, s, core.ReasonQueueOverflow)
	}
	for forced() == 0 {
		if sent == 5000 || time.Now().After(deadline) { // wall clock: the bound above
			t.Fatalf("slow receiver not disconnected after %d packets", sent)
		}
		host.Send(wire.AppendSendOne(nil, slowID, big))
		binary.LittleEndian.PutUint32(seq, uint32(sent))
		host.Send(wire.AppendSendOne(nil, fastID, seq))
		sent++
	}
	// Traffic to the fast client goes on after the disconnect.
	for range 100 {
		binary.LittleEndian.PutUint32(seq, uint32(sent))
		host.Send(wire.AppendSendOne(nil, fastID, seq))
		sent++
	}
	stop <- sent
	if r := <-fastDone; r.err != "" || r.n != sent {
		t.Fatalf("fast client got %d of %d (%s)", r.n, sent, r.err)
	}
	if pk := host.ExpectToHost(wire.ToHostDisconnected); pk.IDs[0] != slowID {
		t.Fatalf("disconnect notice for %v, want the slow client %d", pk.IDs, slowID)
	}
	// Which of the two policies fired first depends on the machine's speed
	// (deadline past the soft bound, or the hard bound); exactly one did.
	if got := forced(); got != 1 {
		t.Fatalf("forced disconnects %v, want 1", got)
	}
	// Another room never noticed.
	host2.Send(sendOne(id2, "fine"))
	if got := client2.Recv(); !equal(got, "fine") {
		t.Fatalf("other room got %q", got)
	}
}
