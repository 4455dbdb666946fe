package udpframe

import (
	"flag"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// message is a pooled buffer holding p with the core's headroom.
func message(p []byte) *buf.Buf {
	b := buf.Get(buf.Headroom + len(p))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], p)
	return b
}

// TestUnframe: each role's packets lose their method byte, which goes
// with the message; what carries none passes as it is; a packet with no
// valid method is dropped.
func TestUnframe(t *testing.T) {
	c, err := core.New(core.Config{Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Allocate("room", "id")
	if err != nil {
		t.Fatal(err)
	}
	auth := func(secret string) *core.Conn {
		cn := c.NewConn(nil)
		b := message(wire.Auth{RoomName: "room", ClientSecret: secret}.Marshal())
		if !Unframe(c, cn, b) {
			t.Fatal("an authentication was dropped")
		}
		c.Handle(cn, b)
		cn.ReleaseQueue()
		return cn
	}
	host, client := auth(a.HostSecret), auth(a.Pub.ClientSecret)
	for _, tc := range []struct {
		name string
		from *core.Conn
		in   []byte
		out  []byte
		d    wire.Delivery
		ok   bool
	}{
		{"client", client, wire.AppendClientUDP(nil, wire.Unreliable, []byte("p")), []byte("p"), wire.Unreliable, true},
		{"client, one byte", client, []byte{5}, []byte{5}, wire.ReliableOrdered, true},
		{"client, no method", client, []byte{9, 'p'}, nil, 0, false},
		{"send one", host, wire.AppendSendOneUDP(nil, 7, wire.Sequenced, []byte("x")), wire.AppendSendOne(nil, 7, []byte("x")), wire.Sequenced, true},
		{"kick", host, wire.AppendKick(nil, 7), wire.AppendKick(nil, 7), wire.ReliableOrdered, true},
		{"send one, method only", host, wire.AppendSendOneUDP(nil, 7, wire.Sequenced, nil), nil, 0, false},
	} {
		b := message(tc.in)
		ok := Unframe(c, tc.from, b)
		if ok != tc.ok {
			t.Fatalf("%s: routed %v, want %v", tc.name, ok, tc.ok)
		}
		if !ok {
			continue
		}
		if string(b.Frame()) != string(tc.out) || b.Method != tc.d {
			t.Fatalf("%s: % x with %d, want % x with %d", tc.name, b.Frame(), b.Method, tc.out, tc.d)
		}
		buf.Put(b)
	}
}

// TestPrefixed: a holder's frame on a UDP link loses the method in front
// of it, which goes with it; a frame with none is refused.
func TestPrefixed(t *testing.T) {
	b := message([]byte{byte(wire.Unreliable), 'a', 'b'})
	if !Prefixed(b) || string(b.Frame()) != "ab" || b.Method != wire.Unreliable {
		t.Fatalf("prefixed frame: % x with %d", b.Frame(), b.Method)
	}
	buf.Put(b)
	for _, p := range [][]byte{nil, {9, 'a'}} {
		if Prefixed(message(p)) {
			t.Fatalf("% x taken as prefixed", p)
		}
	}
}

func TestMain(m *testing.M) {
	lockrank.EnableForTests()
	os.Exit(m.Run())
}

// TestLockOrderIsChecked: this package's tests run with the lock-rank
// checker on (internal/lockrank), benchmarks aside.
func TestLockOrderIsChecked(t *testing.T) {
	if flag.Lookup("test.bench").Value.String() == "" && !lockrank.Enabled() {
		t.Fatal("the lock-rank checker is off")
	}
}
