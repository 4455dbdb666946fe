package litenet

import (
	"testing"
	"time"
)

// With a FlushDelay, what is sent to a peer waits until the delay is up
// and then leaves in one datagram, merged.
func TestFlushDelayMergesWhatWaits(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	const delay = 10 * time.Millisecond
	e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: time.Hour, FlushDelay: delay})
	raw, p := connectRaw(t, e, srv, 10)
	settle(t, e)
	sent := e.Stats().Sent
	for _, m := range []struct {
		m Method
		s string
	}{{Unreliable, "a"}, {Unreliable, "b"}, {ReliableOrdered, "c"}} {
		if err := p.Send(m.m, []byte(m.s)); err != nil {
			t.Fatal(err)
		}
	}
	advance(t, clk, delay-time.Millisecond, e)
	settle(t, e)
	if got := e.Stats().Sent; got != sent {
		t.Fatalf("%d datagrams sent before the flush delay was up", got-sent)
	}
	advance(t, clk, 2*time.Millisecond, e) // (time 0 counts as 1 ns)
	ps := packets(raw.mustRecv(wait))
	if len(ps) != 3 {
		t.Fatalf("the first datagram holds %d packets (%x), want all 3 messages", len(ps), ps)
	}
	got := map[string]Property{}
	for _, pk := range ps {
		got[string(pk[len(pk)-1:])] = Property(pk[0] & 0x1f)
	}
	if got["a"] != PropUnreliable || got["b"] != PropUnreliable || got["c"] != PropReliableMerged {
		t.Fatalf("packets %x, want a and b Unreliable and c ReliableOrdered", ps)
	}
}
