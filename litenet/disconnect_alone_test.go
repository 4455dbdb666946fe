package litenet

import (
	"testing"
	"time"
)

// TestDisconnectTravelsAlone: LiteNetLib reads a Disconnect only as a
// datagram of its own (its NetManager handles it; inside a Merged datagram
// its NetPeer ignores it, as Peer.packet does). A gracefully closing peer
// that still owes something (here a pong, as when the client's ping came
// in just before) sends that, then a bare Disconnect, and the client learns
// it was disconnected. Merged behind the pong, the Disconnect was lost on
// the client, which then hung on until its own timeout: a relay's UDP
// peers missed its shutdown now and then (relay TestUDPAuthTimeoutAndShutdown
// under load).
func TestDisconnectTravelsAlone(t *testing.T) { bothVersions(t, disconnectTravelsAlone) }

func disconnectTravelsAlone(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: time.Hour})
	cli := newRecorder(false)
	_, cp := dial(t, e.LocalAddr(), Config{Handler: cli, PingInterval: time.Hour, DisconnectTimeout: time.Hour})
	if err := cp.Send(Unreliable, []byte{0}); err != nil { // the server's peer appears on the first message
		t.Fatal(err)
	}
	p := srv.waitKind(t, "connected", wait).p
	srv.waitKind(t, "recv", wait)
	waitProven(t, e, p.Addr()) // the client answered the first ping

	p.mu.Lock()
	p.pongOwed = true // its ping was read, the pong not sent yet
	p.mu.Unlock()
	p.Close(true)
	if ev := cli.waitKind(t, "disconnected", 10*time.Second); ev.why != ReasonRemote {
		t.Fatalf("the client ended with %v, want the server's Disconnect (ReasonRemote)", ev.why)
	}
}

// TestDisconnectDatagramIsBare checks the datagram itself, as a stock
// LiteNetLib client would read it.
func TestDisconnectDatagramIsBare(t *testing.T) { bothVersions(t, disconnectDatagramIsBare) }

func disconnectDatagramIsBare(t *testing.T) {
	clk := fakeClock()
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: time.Hour})
	raw, p := connectRaw(t, e, srv, 10)
	p.mu.Lock()
	p.pongOwed = true
	p.mu.Unlock()
	p.Close(true)
	for {
		d := raw.mustRecv(wait)
		for _, pk := range packets(d) {
			if Property(pk[0]&0x1f) != PropDisconnect {
				continue
			}
			if Property(d[0]&0x1f) != PropDisconnect {
				t.Fatalf("the Disconnect went out inside a datagram of property %d: %x", d[0]&0x1f, d)
			}
			return
		}
	}
}
