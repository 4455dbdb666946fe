package relay

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/udptransport"
	"github.com/purrfly/purrfly/wire"
)

// More frames than a UDP peer's backlog (udptransport.Backlog) queued for it at once,
// then silence: every one reaches it. The flush that stopped at the
// backlog is called again once LiteNetLib's queue empties.
func TestUDPBurstPastBacklogDrains(t *testing.T) {
	s := startRelay(t, Options{UDPFlush: 10 * time.Millisecond})
	hs, cs := mustAllocate(t, s, "burst")
	h := udpHost(t, s, "burst", hs, false)
	cl := udpClient(t, s, "burst", cs, false)
	cc := s.core.Conn(nextOfType(t, h, wire.ToHostConnected).IDs[0])
	const n = 3 * udptransport.Backlog
	// All of it queued within the fixed flush delay (UDPFlush, 10 ms): the
	// flush that follows finds more than the backlog takes.
	for i := range n {
		b := buf.Get(8)
		b.End = copy(b.B, []byte{byte(i), byte(i >> 8), 'x', 'y'})
		b.Method = wire.Unreliable
		cc.Enqueue(b, core.DirControl)
	}
	for got := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		b, err := cl.Recv(ctx)
		cancel()
		if err != nil {
			t.Fatalf("the client got %d of %d frames, then nothing (%v)", got, n, err)
		}
		if int(b[0])|int(b[1])<<8 != got {
			t.Fatalf("frame %d arrived as %d", got, int(b[0])|int(b[1])<<8)
		}
	}
}

// A UDP client sends a burst of small Unreliable messages in one go (a
// game tick's worth and more), then nothing: on loopback the host gets
// every one.
func TestUDPClientBurstReachesHost(t *testing.T) {
	s := startRelay(t, Options{})
	hs, cs := mustAllocate(t, s, "burst2")
	h := udpHost(t, s, "burst2", hs, false)
	cl := udpClient(t, s, "burst2", cs, false)
	nextOfType(t, h, wire.ToHostConnected)
	const n = 400
	for i := range n {
		if err := cl.SendWith(tctx(t), wire.Unreliable, []byte{byte(i), byte(i >> 8), 1, 2, 3, 4}); err != nil {
			t.Fatal(err)
		}
	}
	for got := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		p, err := h.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("the host got %d of %d, then nothing (%v)", got, n, err)
		}
		if p.Type != wire.ToHostData {
			t.Fatalf("host got packet type %d", p.Type)
		}
	}
}

// A UDP peer that goes silent after it authenticated is dropped after the
// UDP timeout, counted as peer_timeout; its host hears that it left.
func TestUDPSilentPeerTimesOut(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	s := startRelay(t, Options{Clock: fake, UDPTimeout: 5 * time.Second, UDPFlush: -1})
	hs, cs := mustAllocate(t, s, "silent")
	h := join(t, s, "silent", hs) // over WebSocket: no UDP timeout of its own
	// A hand-made peer: after its authentication it sends nothing, not
	// even a pong or an ack, as if its process had died.
	raw := newRawUDP(t, netip.MustParseAddrPort(s.UDPAddr()), 10)
	raw.auth("silent", cs, wire.Authenticated)
	id := h.ExpectToHost(wire.ToHostConnected).IDs[0]
	timedOut := func() bool { return disconnects(t, s, core.ReasonPeerTimeout) == 1 }
	for i := 0; !timedOut(); i++ {
		if i == 60 {
			t.Fatal("a silent UDP peer was kept past the UDP timeout")
		}
		fake.Advance(time.Second)
		// A moment for litenet's flusher to run on the new time.
		testutil.Poll(20*time.Millisecond, timedOut)
	}
	if got := h.ExpectToHost(wire.ToHostDisconnected).IDs[0]; got != id {
		t.Fatalf("host told %d left, want %d", got, id)
	}
}
