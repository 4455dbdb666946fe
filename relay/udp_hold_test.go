package relay

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// TestUDPHoldIsTheBusyRulesWait: UDP_HOLD_US (Options.UDPHold) is how
// long a busy peer waits for company. A host sent a client's message
// every 2 ms (on the relay's clock) is not busy for the default 1 ms
// hold, and each message reaches it at once; with a 5 ms hold it soon
// waits, and the next messages reach it together once the hold is up.
// One sent a message every 0.5 ms would wait under the default; with
// the hold off (-1) it never does.
func TestUDPHoldIsTheBusyRulesWait(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hold, gap time.Duration
		waits     bool
	}{
		{"default", 0, 2 * time.Millisecond, false},
		{"default busy", 0, 500 * time.Microsecond, true},
		{"5ms", 5 * time.Millisecond, 2 * time.Millisecond, true},
		{"off", -1, 500 * time.Microsecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) { udpHold(t, tc.hold, tc.gap, tc.waits) })
	}
}

func udpHold(t *testing.T, hold, gap time.Duration, waits bool) {
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	s := startRelay(t, Options{Clock: fake, UDPHold: hold, UDPTimeout: time.Hour})
	hs, cs := mustAllocate(t, s, "hold")
	relayAddr := netip.MustParseAddrPort(s.UDPAddr())
	host := newRawUDP(t, relayAddr, 100)
	host.auth("hold", hs, wire.Authenticated)
	cl := newRawUDP(t, relayAddr, 200)
	cl.auth("hold", cs, wire.Authenticated)
	host.expectReliable(wire.ToHostConnected)

	// The client's message i is [Unreliable][method][i]; the host reads
	// it as [Unreliable][ToHostData][id:4][i].
	send := func(i byte) { cl.send([]byte{byte(litenet.PropUnreliable), byte(wire.Unreliable), i}) }
	// got reads the host's datagrams for up to d (wall clock: the relay
	// runs on its own goroutines) and returns the messages' numbers in
	// the first datagram that carries any.
	got := func(d time.Duration) []byte {
		t.Helper()
		_ = host.c.SetReadDeadline(time.Now().Add(d))
		defer host.c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			n, _, err := host.c.ReadFromUDPAddrPort(host.buf)
			if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
				return nil
			} else if err != nil {
				t.Fatal(err)
			}
			var nums []byte
			for _, p := range litenet.Packets(host.buf[:n]) {
				if len(p) == 7 && litenet.Property(p[0]&0x1f) == litenet.PropUnreliable && p[1] == wire.ToHostData {
					nums = append(nums, p[6])
				}
			}
			if len(nums) > 0 {
				return nums
			}
		}
	}

	held := -1
	for i := range byte(30) {
		fake.Advance(gap)
		send(i)
		// A message that is not held arrives within moments; one held
		// never does while the relay's clock stands still.
		wait := 5 * time.Second
		if waits && i >= 6 {
			wait = time.Second
		}
		if nums := got(wait); len(nums) == 0 {
			held = int(i)
			break
		} else if len(nums) != 1 || nums[0] != i {
			t.Fatalf("message %d: the host got %v", i, nums)
		}
	}
	if !waits {
		if held >= 0 {
			t.Fatalf("message %d waited for company", held)
		}
		return
	}
	if held < 0 {
		t.Fatalf("a host sent a message every %v never waited under a hold of %v", gap, hold)
	}
	send(byte(held + 1))
	if nums := got(100 * time.Millisecond); nums != nil { // the relay reads it meanwhile, and holds it too
		t.Fatalf("held: %v", nums)
	}
	wantSteps := int(max(hold, DefaultUDPBusyWait) / time.Millisecond)
	// The hold is up exactly the hold after the held message was woken;
	// the relay's flusher then sends both in one datagram.
	for j := range 20 {
		fake.Advance(time.Millisecond)
		wait := 100 * time.Millisecond // nothing may leave before the hold is up
		if j+1 >= wantSteps {
			wait = 5 * time.Second
		}
		if nums := got(wait); len(nums) > 0 {
			if j+1 != wantSteps {
				t.Fatalf("released after %d ms, want %d", j+1, wantSteps)
			}
			if len(nums) != 2 || nums[0] != byte(held) || nums[1] != byte(held+1) {
				t.Fatalf("after the hold the host got %v in one datagram, want %d and %d", nums, held, held+1)
			}
			return
		}
	}
	t.Fatal("the held messages never left")
}
