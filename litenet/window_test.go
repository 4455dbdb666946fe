package litenet

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// A sender with more queued than its 64-packet window holds sends the next
// packets as soon as an ack frees window space, not when the resend timer
// fires: on a clock that never moves past the resend delay between acks,
// ten windows go through without one resend.
func TestWindowRefillsOnAck(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: time.Hour})
	ce, p := dial(t, e.LocalAddr(), Config{Handler: newRecorder(false), Clock: clk, PingInterval: time.Hour})
	const n = 10 * windowSize
	msg := pattern(1000) // one packet each: too long to merge
	for range n {
		if err := p.Send(ReliableOrdered, msg); err != nil {
			t.Fatal(err)
		}
	}
	for range n / windowSize {
		collectWindow(t, srv, clk, e, ce)
		// A tick: the receiver's lone acks go (they wait a tick for
		// company), well inside the 25 ms resend delay.
		advance(t, clk, ackWait, e, ce)
	}
	if r := ce.Stats().Resent; r != 0 {
		t.Fatalf("%d packets sent again: the window waited for the resend timer", r)
	}
}

// An empty reliable message and the one queued behind it both arrive, in
// order: LiteNetLib would merge the empty one with length 0, which ends a
// merged packet at the receiver and loses what follows.
func TestEmptyReliableMessageArrives(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	_, p := dial(t, e.LocalAddr(), Config{Handler: newRecorder(false)})
	srv.waitKind(t, "connected", wait)
	p.mu.Lock() // both queued before a flush can take either
	err1 := p.sendLocked(ReliableOrdered, nil)
	err2 := p.sendLocked(ReliableOrdered, []byte("after-empty"))
	p.mu.Unlock()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	p.Wake()
	got := srv.collect(t, 2, wait)
	if len(got[0].data) != 0 || !bytes.Equal(got[1].data, []byte("after-empty")) {
		t.Fatalf("got %q then %q", got[0].data, got[1].data)
	}
}

// A reliable packet that arrives again (its ack was lost) is acknowledged
// again and not delivered twice.
func TestDuplicateReliablePacketAcknowledgedAgain(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: time.Hour})
	raw, _ := connectRaw(t, e, srv, 10)
	pkt := []byte{byte(PropChanneled), 0, 0, byte(ReliableOrdered), 'x'}
	for i := range 2 {
		raw.send(pkt)
		waitDatagramsIn(t, e, uint64(4+i)) // request, first packet, pong, then these
		advance(t, clk, ackWait, e)
		if acks := lastAck(t, raw, byte(ReliableOrdered)); acks&1 == 0 {
			t.Fatalf("send %d: ack %064b does not hold sequence 0", i, acks)
		}
	}
	raw.send([]byte{byte(PropUnreliable), 'z'})
	if ev := srv.waitKind(t, "recv", wait); string(ev.data) != "x" {
		t.Fatalf("first delivery %q", ev.data)
	}
	if ev := srv.waitKind(t, "recv", wait); string(ev.data) != "z" {
		t.Fatalf("the duplicate was delivered again: %q", ev.data)
	}
}

// ackWait is how long a lone ack waits, at most: a tick from when it
// became owed (the endpoint's time 0 counts as 1 ns).
const ackWait = DefaultTick + time.Millisecond

// waitDatagramsIn waits until e has received n datagrams.
func waitDatagramsIn(t *testing.T, e *Endpoint, n uint64) {
	t.Helper()
	deadline := time.Now().Add(wait) // wall clock: bounds a wait for a real socket
	for e.Stats().Datagrams < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d datagrams received, want %d", e.Stats().Datagrams, n)
		}
		runtime.Gosched()
	}
}

// A graceful close sends its Disconnect as soon as the last ack drains the
// peer, not at the peer's next timer (on this frozen clock: never).
func TestGracefulCloseDisconnectsOnLastAck(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: time.Hour})
	raw, p := connectRaw(t, e, srv, 10)
	if err := p.Send(ReliableOrdered, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	nextOf(t, raw, PropReliableMerged)
	p.Close(true)
	ack := make([]byte, ackPacketSize)
	ack[0], ack[3], ack[4] = byte(PropAck), byte(ReliableOrdered), 1 // sequence 0 received
	raw.send(ack)
	if d := nextOf(t, raw, PropDisconnect); !bytes.Equal(d, AppendDisconnect(nil, 0, 10)) {
		t.Fatalf("disconnect %x", d)
	}
}

// collectWindow waits for one window of packets at srv. Now and then (6
// in 400 runs beside the chaos test) the tick after the previous window
// did not send the receiver's ack, and nothing moved until the next
// Advance: a gap between the fake clock, a socket's reader and its
// flusher that settle does not see (not found yet; with a real clock the
// flusher's next tick sends it). One more tick is then given: two ticks
// (22 ms) stay inside the 25 ms resend delay, so a resend still fails the
// test.
func collectWindow(t *testing.T, srv *recorder, clk *clock.Fake, es ...*Endpoint) {
	t.Helper()
	got, extra := 0, false
	deadline := time.Now().Add(wait) // wall clock: a bound on real sockets
	for got < windowSize {
		select {
		case ev := <-srv.events:
			if ev.kind == "recv" {
				got++
			}
		case <-time.After(250 * time.Millisecond): // wall clock: how long a stalled tick is waited for
			switch {
			case !extra:
				extra = true
				advance(t, clk, ackWait, es...)
			case time.Now().After(deadline):
				t.Fatalf("%d of a window of %d packets arrived", got, windowSize)
			}
		}
	}
}
