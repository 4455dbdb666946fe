package litenet

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// A server ignores PeerNotFound from its clients: the short forms carry
// nothing secret, so anyone who can forge a client's source address could
// otherwise end its connection.
func TestServerIgnoresPeerNotFound(t *testing.T) { bothVersions(t, serverIgnoresPeerNotFound) }

func serverIgnoresPeerNotFound(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	raw, p := connectRaw(t, e, srv, 10)
	raw.send([]byte{byte(PropPeerNotFound)})
	raw.send([]byte{byte(PropPeerNotFound), 1})
	raw.send([]byte{byte(PropUnreliable), 'z'})
	if ev := srv.next(t, wait); ev.kind != "recv" || string(ev.data) != "z" {
		t.Fatalf("after forged PeerNotFound packets the server saw %s (%v), want the next message", ev.kind, ev.why)
	}
	if got := e.peers.get(raw.addr()); got != p {
		t.Fatal("the peer left the table")
	}
}

// An address that is accepted but never sends another packet (perhaps
// forged) is forgotten after PendingTimeout without a word: it got the
// accept and nothing more, no Disconnect repeats to amplify.
func TestUnprovenConnectionForgottenSilently(t *testing.T) {
	bothVersions(t, unprovenConnectionForgottenSilently)
}

func unprovenConnectionForgottenSilently(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, PendingTimeout: 3 * time.Second, PingInterval: time.Hour})
	raw := newRaw(t, e.LocalAddr())
	raw.send(connectRequest(0, 10, "PurrNet"))
	if b := raw.mustRecv(wait); Property(b[0]&0x1f) != PropConnectAccept {
		t.Fatalf("got %x, want the accept", b)
	}
	advance(t, clk, 3*time.Second+2*DefaultTick, e)
	deadline := time.Now().Add(wait) // wall clock: bounds a wait for the flusher
	for e.Stats().Peers != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the unproven connection was kept")
		}
		runtime.Gosched()
	}
	// The next datagram it gets is the answer to this one: nothing was
	// sent in between.
	raw.send([]byte{byte(PropUnreliable), 'z'})
	if b := raw.mustRecv(wait); !bytes.Equal(b, peerNotFound) {
		t.Fatalf("got %x, want PeerNotFound for a forgotten address", b)
	}
	select {
	case ev := <-srv.events:
		t.Fatalf("the handler saw %s of a connection it was never given", ev.kind)
	default:
	}
}

// A handler that refuses a new peer: the peer is disconnected at once and
// the handler hears nothing more of it.
func TestHandlerRefusesPeer(t *testing.T) { bothVersions(t, handlerRefusesPeer) }

func handlerRefusesPeer(t *testing.T) {
	srv := newRecorder(false)
	srv.refuse.Store(true)
	e := listen(t, Config{Handler: srv})
	raw := newRaw(t, e.LocalAddr())
	raw.send(connectRequest(0, 10, "PurrNet"))
	raw.mustRecv(wait)
	raw.send([]byte{byte(PropUnreliable), 'a'})
	srv.waitKind(t, "connected", wait)
	raw.send([]byte{byte(PropUnreliable), 'b'})
	if d := nextOf(t, raw, PropDisconnect); !bytes.Equal(d, AppendDisconnect(nil, 0, 10)) {
		t.Fatalf("disconnect %x", d)
	}
	raw.send([]byte{byte(PropUnreliable), 'c'})
	waitDatagramsIn(t, e, 4)
	settle(t, e) // the reader is done with them
	select {
	case ev := <-srv.events:
		t.Fatalf("the handler saw %s of a peer it refused", ev.kind)
	default:
	}
}
