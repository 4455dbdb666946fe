package litenet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// connectRaw connects a raw socket to e and proves the connection with
// one Unreliable packet; it returns the server's peer.
func connectRaw(t *testing.T, e *Endpoint, srv *recorder, connectTime int64) (*rawConn, *Peer) {
	t.Helper()
	raw := newRaw(t, e.LocalAddr())
	raw.send(connectRequest(0, connectTime, "PurrNet"))
	raw.mustRecv(wait)
	raw.send([]byte{byte(PropUnreliable), 0})
	p := srv.waitKind(t, "connected", wait).p
	srv.waitKind(t, "recv", wait)
	if fc, ok := e.clk.(*clock.Fake); ok && e.cfg.FlushDelay > 0 {
		advance(t, fc, e.cfg.FlushDelay+time.Millisecond, e) // the ping waits for the flush
	}
	raw.proved = raw.prove()
	waitProven(t, e, raw.addr())
	return raw, p
}

// prove answers the server's first ping, as a client does at once: the
// pong proves the address receives, and the server sends it freely from
// then on (reflect.go). It returns the ping.
func (r *rawConn) prove() []byte {
	r.tb.Helper()
	for {
		for _, p := range packets(r.mustRecv(wait)) {
			if Property(p[0]&0x1f) == PropPing {
				pong := make([]byte, 11)
				pong[0] = byte(PropPong) | p[0]&0x60
				copy(pong[1:3], p[1:3])
				r.send(pong)
				return p
			}
		}
	}
}

// nextOf reads datagrams until one holds a packet of prop, and returns it.
func nextOf(t *testing.T, raw *rawConn, prop Property) []byte {
	t.Helper()
	for {
		for _, p := range packets(raw.mustRecv(wait)) {
			if Property(p[0]&0x1f) == prop {
				return p
			}
		}
	}
}

// A silent peer is dropped after DisconnectTimeout, with a Disconnect.
func TestDisconnectTimeout(t *testing.T) { bothVersions(t, disconnectTimeout) }

func disconnectTimeout(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, DisconnectTimeout: 5 * time.Second, PingInterval: time.Hour})
	raw, p := connectRaw(t, e, srv, 10)
	advance(t, clk, 4*time.Second, e)
	advance(t, clk, time.Second+DefaultTick, e)
	if ev := srv.waitKind(t, "disconnected", wait); ev.p != p || ev.why != ReasonTimeout {
		t.Fatalf("got %+v", ev)
	}
	if d := nextOf(t, raw, PropDisconnect); !bytes.Equal(d, AppendDisconnect(nil, 0, 10)) {
		t.Fatalf("disconnect %x", d)
	}
}

// A connection the application never confirms ends after PendingTimeout.
func TestPendingTimeout(t *testing.T) { bothVersions(t, pendingTimeout) }

func pendingTimeout(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	srv.noConfirm.Store(true)
	e := listen(t, Config{Handler: srv, Clock: clk, PendingTimeout: 3 * time.Second, PingInterval: time.Hour})
	_, p := connectRaw(t, e, srv, 10)
	if e.Stats().Pending != 1 {
		t.Fatalf("pending %d", e.Stats().Pending)
	}
	advance(t, clk, 3*time.Second+DefaultTick, e)
	if ev := srv.waitKind(t, "disconnected", wait); ev.p != p || ev.why != ReasonPendingTimeout {
		t.Fatalf("got %+v", ev)
	}
}

// The server pings every PingInterval, answers pings with pongs, measures
// the RTT from the pong and resends an unacknowledged reliable packet after
// 25 ms + 2.1 x RTT.
func TestPingPongAndResend(t *testing.T) { bothVersions(t, pingPongAndResend) }

func pingPongAndResend(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: time.Second})
	raw, p := connectRaw(t, e, srv, 10)
	proof := binary.LittleEndian.Uint16(raw.proved[1:])
	settle(t, e) // the proof's pong is in: its RTT sample (0) is taken
	p.mu.Lock()
	p.rttSum, p.rttCount = 0, 0
	p.mu.Unlock()

	advance(t, clk, time.Second, e)
	ping := nextOf(t, raw, PropPing)
	if got := binary.LittleEndian.Uint16(ping[1:]); len(ping) != 3 || got != proof+1 {
		t.Fatalf("ping %x, want the one after the proof's (seq %d)", ping, proof+1)
	}
	advance(t, clk, 100*time.Millisecond, e) // the pong takes 100 ms
	raw.send([]byte{byte(PropPong), ping[1], ping[2], 0, 0, 0, 0, 0, 0, 0, 0})
	raw.send([]byte{byte(PropPing), 9, 0}) // and the client pings
	pong := nextOf(t, raw, PropPong)
	if pong[1] != 9 || int64(binary.LittleEndian.Uint64(pong[3:])) != Ticks(clk.Now()) {
		t.Fatalf("pong %x", pong)
	}
	if rtt := p.RTT(); rtt != 100*time.Millisecond {
		t.Fatalf("rtt %v", rtt)
	}
	// 25 + 2.1 x 100 = 235 ms.
	if err := p.Send(ReliableOrdered, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	data := PropReliableMerged
	if testVersion == V1 {
		data = PropChanneled // 1.x has no ReliableMerged
	}
	first := nextOf(t, raw, data)
	advance(t, clk, 230*time.Millisecond, e)
	advance(t, clk, DefaultTick, e)
	if again := nextOf(t, raw, data); !bytes.Equal(again, first) {
		t.Fatalf("resent %x, want %x", again, first)
	}
	// Acknowledged, it is not sent again.
	ack := make([]byte, ackPacketSize)
	ack[0], ack[3], ack[4] = byte(PropAck), byte(ReliableOrdered), 1
	raw.send(ack)
	raw.send([]byte{byte(PropPing), 10, 0}) // a marker: its pong follows the ack's processing
	nextOf(t, raw, PropPong)
	advance(t, clk, time.Second, e)
	for {
		b := raw.recv(100 * time.Millisecond)
		if b == nil {
			break
		}
		for _, pk := range packets(b) {
			if Property(pk[0]&0x1f) == PropReliableMerged {
				t.Fatalf("acknowledged packet sent again: %x", pk)
			}
		}
	}
}

// A graceful close sends Disconnect once the queue is acknowledged, or
// after CloseGrace when the peer never acknowledges; then the Disconnect is
// repeated every 300 ms until ShutdownOk.
func TestGracefulCloseGraceAndShutdownRepeat(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, CloseGrace: time.Second, PingInterval: time.Hour})
	raw, p := connectRaw(t, e, srv, 33)
	_ = p.Send(ReliableOrdered, []byte("bye"))
	p.Close(true)
	nextOf(t, raw, PropReliableMerged) // the queued message goes first
	advance(t, clk, time.Second+DefaultTick, e)
	d := nextOf(t, raw, PropDisconnect)
	if !bytes.Equal(d, AppendDisconnect(nil, 0, 33)) {
		t.Fatalf("disconnect %x", d)
	}
	if ev := srv.waitKind(t, "disconnected", wait); ev.why != ReasonClosed {
		t.Fatalf("reason %v", ev.why)
	}
	advance(t, clk, shutdownDelay, e)
	nextOf(t, raw, PropDisconnect) // repeated
	raw.send(shutdownOk)
	raw.send([]byte{byte(PropPing), 5, 0})
	advance(t, clk, shutdownDelay, e)
	// Answered: forgotten, so the next packet gets PeerNotFound.
	for e.Stats().Peers != 0 {
		advance(t, clk, DefaultTick, e)
		if b := raw.recv(20 * time.Millisecond); b != nil && Property(b[0]&0x1f) == PropPing {
			t.Fatalf("a forgotten peer was pinged")
		}
	}
	raw.send([]byte{byte(PropPing), 6, 0})
	if b := raw.mustRecv(wait); !bytes.Equal(b, peerNotFound) {
		t.Fatalf("got %x, want PeerNotFound", b)
	}
}

// A client repeats its ConnectRequest every 500 ms, 11 times in all, then
// gives up (ConnectionFailed).
func TestDialRetriesThenFails(t *testing.T) {
	clk := fakeClock()
	sink := newRaw(t, netipLoop(9)) // a server that never answers
	done := make(chan error, 1)
	go func() {
		_, _, err := Dial(context.Background(), sink.addr(), "PurrNet", Config{Handler: newRecorder(false), Clock: clk})
		done <- err
	}()
	for i := range connectAttempts + 1 {
		b := sink.mustRecv(wait)
		if Property(b[0]&0x1f) != PropConnectRequest {
			t.Fatalf("attempt %d sent %x", i, b)
		}
		// The client's flusher (the only timer on clk) arms its timer
		// relative to the time it sees: advance only once it waits.
		waitArmed(t, clk, 1)
		clk.Advance(connectRetry)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(wait): // wall clock: bounds the wait for Dial's goroutine
		t.Fatal("Dial did not give up")
	}
	var de *DialError
	if !errors.As(err, &de) || de.Reason != ReasonConnectFailed {
		t.Fatalf("Dial: %v", err)
	}
}

// A client learns that the server rejected it.
func TestDialRejected(t *testing.T) { bothVersions(t, dialRejected) }

func dialRejected(t *testing.T) {
	e := listen(t, Config{Handler: newRecorder(false)})
	_, _, err := Dial(context.Background(), e.LocalAddr(), "wrong-key", Config{Handler: newRecorder(false), Version: testVersion})
	var de *DialError
	if !errors.As(err, &de) || de.Reason != ReasonRejected {
		t.Fatalf("Dial: %v", err)
	}
}

// waitProven waits until the peer of addr has proved its address (its
// pong was read).
func waitProven(t *testing.T, e *Endpoint, addr netip.AddrPort) {
	t.Helper()
	deadline := time.Now().Add(wait) // wall clock: bounds a wait for the reader
	for {
		if p := e.peers.get(addr); p != nil {
			p.mu.Lock()
			ok := p.proven
			p.mu.Unlock()
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v never proved itself", addr)
		}
		runtime.Gosched()
	}
}
