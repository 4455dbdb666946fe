package litenet

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The two versions share protocol id 13, so each has its own port, and a
// client at the wrong one is refused as the real libraries refuse it: a
// 1.x client at a 2.x server has its ConnectRequest (a 2.x Pong) answered
// PeerNotFound, which 1.x reads as InvalidProtocol; a 2.x client at a 1.x
// server (its request a 1.x ConnectAccept) is answered 2.x's
// InvalidProtocol. Either fails at once, the server keeps no state, and
// its own clients play on.
func TestWrongVersionRefusedAtOnce(t *testing.T) {
	for _, tc := range []struct{ server, client Version }{{V2, V1}, {V1, V2}} {
		t.Run("server "+tc.server.String(), func(t *testing.T) {
			srv := newRecorder(true)
			e := listen(t, Config{Handler: srv, Version: tc.server})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			start := time.Now() // wall clock: how long a stock client waits
			_, _, err := Dial(ctx, e.LocalAddr(), "PurrNet", Config{Handler: newRecorder(false), Version: tc.client})
			var de *DialError
			if !errors.As(err, &de) || de.Reason != ReasonInvalidProtocol {
				t.Fatalf("a %v client at a %v server: %v, want InvalidProtocol", tc.client, tc.server, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("refused after %v, want at once (before a connect retry)", d)
			}
			if st := e.Stats(); st.Peers != 0 || st.Pending != 0 || st.Accepted != 0 {
				t.Fatalf("the server kept state for the wrong version: %+v", st)
			}
			cli := newRecorder(false)
			_, p := dial(t, e.LocalAddr(), Config{Handler: cli, Version: tc.server})
			if err := p.Send(ReliableOrdered, []byte("still here")); err != nil {
				t.Fatal(err)
			}
			if ev := cli.waitKind(t, "recv", wait); string(ev.data) != "still here" {
				t.Fatalf("echo %q", ev.data)
			}
		})
	}
}

// A connected peer's address sending the other version's datagrams (a
// stale build on the same port, a confused NAT) neither ends the
// connection nor delivers anything.
func TestOtherVersionDatagramsDoNotConfusePeer(t *testing.T) {
	bothVersions(t, func(t *testing.T) {
		srv := newRecorder(false)
		e := listen(t, Config{Handler: srv})
		raw, p := connectRaw(t, e, srv, 10)
		other := V1
		if testVersion == V1 {
			other = V2
		}
		req := connectRequest(0, 11, "PurrNet")
		ToWire(other, req)
		ack := make([]byte, ackPacketSize)
		ack[0], ack[3] = byte(PropAck), byte(ReliableOrdered)
		ToWire(other, ack)
		ping := []byte{byte(PropPing), 3, 0}
		ToWire(other, ping)
		raw.v = V2 // as they are
		for _, b := range [][]byte{req, ack, ping} {
			raw.send(b)
		}
		raw.v = testVersion
		raw.send([]byte{byte(PropUnreliable), 'z'})
		ev := srv.next(t, wait)
		if ev.kind != "recv" || string(ev.data) != "z" {
			t.Fatalf("after the other version's datagrams the server saw %s %q (%v), want the next message", ev.kind, ev.data, ev.why)
		}
		if e.peers.get(raw.addr()) != p {
			t.Fatal("the peer left the table")
		}
	})
}
