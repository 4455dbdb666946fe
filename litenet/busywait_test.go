package litenet

import (
	"encoding/binary"
	"testing"
	"time"
)

// Under the busy rule a quiet peer's message leaves at once; a peer woken
// every millisecond soon waits for company (BusyWait), and what it is sent
// meanwhile leaves in one datagram when the wait is up.
func TestBusyWaitHoldsOnlyBusyPeers(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	const busy = 5 * time.Millisecond
	e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: time.Hour, BusyWait: busy})
	raw, p := connectRaw(t, e, srv, 10)
	advance(t, clk, time.Second, e) // quiet for a second
	for raw.recv(10*time.Millisecond) != nil {
	}
	send := func(s string) {
		t.Helper()
		if err := p.Send(Unreliable, []byte(s)); err != nil {
			t.Fatal(err)
		}
		settle(t, e)
	}
	sent := e.Stats().Sent
	send("q")
	if got := e.Stats().Sent; got != sent+1 {
		t.Fatalf("a quiet peer's message: %d datagrams sent at once, want 1", got-sent)
	}
	raw.mustRecv(wait)
	held := false
	for i := range 20 {
		advance(t, clk, time.Millisecond, e)
		sent = e.Stats().Sent
		send("a")
		if e.Stats().Sent == sent {
			held = true
			break
		}
		if i == 19 {
			t.Fatal("a peer woken every millisecond never waited for company")
		}
		raw.mustRecv(wait)
	}
	if !held {
		return
	}
	send("b")
	advance(t, clk, busy-time.Millisecond, e)
	settle(t, e)
	if got := e.Stats().Sent; got != sent {
		t.Fatalf("%d datagrams sent before the busy wait was up", got-sent)
	}
	advance(t, clk, 2*time.Millisecond, e)
	ps := packets(raw.mustRecv(wait))
	if len(ps) != 2 || string(ps[0][1:]) != "a" || string(ps[1][1:]) != "b" {
		t.Fatalf("the released datagram holds %q, want a and b merged", ps)
	}
	// Quiet again: the average gap grows past the wait, and a message
	// leaves at once.
	for range 10 {
		advance(t, clk, 100*time.Millisecond, e)
		sent = e.Stats().Sent
		send("z")
		raw.mustRecv(wait)
	}
	if got := e.Stats().Sent; got != sent+1 {
		t.Fatalf("after a quiet spell a message waited (%d datagrams at once)", got-sent)
	}
}

// Under the busy rule an ack with nothing to ride with still waits for
// company: a reliable packet in makes no datagram of its own at once; the
// next message to the peer carries the ack merged with it.
func TestBusyWaitAckWaitsForCompany(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: time.Hour, BusyWait: time.Millisecond})
	raw, p := connectRaw(t, e, srv, 10)
	advance(t, clk, time.Second, e)
	for raw.recv(10*time.Millisecond) != nil {
	}
	sent := e.Stats().Sent
	raw.send([]byte{byte(PropChanneled), 0, 0, byte(ReliableOrdered), 'x'})
	if ev := srv.waitKind(t, "recv", wait); string(ev.data) != "x" {
		t.Fatalf("delivered %q", ev.data)
	}
	settle(t, e)
	if got := e.Stats().Sent; got != sent {
		t.Fatalf("a lone ack left at once (%d datagrams): it should wait for company", got-sent)
	}
	if err := p.Send(Unreliable, []byte("y")); err != nil {
		t.Fatal(err)
	}
	var ack, msg bool
	for _, q := range packets(raw.mustRecv(wait)) {
		switch Property(q[0] & 0x1f) {
		case PropAck:
			ack = q[3] == byte(ReliableOrdered) && binary.LittleEndian.Uint64(q[4:])&1 == 1
		case PropUnreliable:
			msg = string(q[1:]) == "y"
		}
	}
	if !ack || !msg {
		t.Fatalf("the next datagram: ack %v, message %v; want both, merged", ack, msg)
	}
}
