package litenet

import (
	"runtime"
	"testing"
	"time"
)

// With Config.Arrivals a message's Peer.Arrival, read in Receive, is the
// kernel's stamp of the datagram that brought it: after the message was
// sent, before Receive ran. Without it, Arrival is the zero time.
func TestArrivalStamps(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("arrival stamps are Linux's")
	}
	srv := newRecorder(true)
	e := listen(t, Config{Handler: srv})
	cli := newRecorder(false)
	_, p := dial(t, e.LocalAddr(), Config{Handler: cli, Arrivals: true})
	srv.waitKind(t, "connected", 5*time.Second)
	for _, m := range []Method{Unreliable, ReliableOrdered} {
		before := time.Now()
		if err := p.Send(m, []byte("stamp me")); err != nil {
			t.Fatal(err)
		}
		in := srv.waitKind(t, "recv", 5*time.Second)
		if !in.at.IsZero() {
			t.Fatalf("%v: a server without Arrivals stamped %v", m, in.at)
		}
		back := cli.waitKind(t, "recv", 5*time.Second)
		after := time.Now()
		if back.at.Before(before) || back.at.After(after) {
			t.Fatalf("%v: echo stamped %v, want between the send (%v) and its receipt (%v)", m, back.at, before, after)
		}
	}
}
