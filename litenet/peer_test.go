package litenet

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// A Go client and a Go server exchange every method both ways, including
// messages that need fragments (5,000 and 65,535 bytes), in order.
func TestPeersExchangeEveryMethod(t *testing.T) { bothVersions(t, peersExchangeEveryMethod) }

func peersExchangeEveryMethod(t *testing.T) {
	srv := newRecorder(true)
	e := listen(t, Config{Handler: srv})
	cli := newRecorder(false)
	_, p := dial(t, e.LocalAddr(), Config{Handler: cli})
	msgs := []struct {
		m Method
		b []byte
	}{
		{ReliableOrdered, []byte("ro-1")},
		{ReliableUnordered, []byte("ru-1")},
		{Sequenced, []byte("seq-1")},
		{ReliableSequenced, []byte("rs-1")},
		{Unreliable, []byte("unrel-1")},
		{ReliableOrdered, pattern(5000)},
		{ReliableUnordered, pattern(5000)},
		{ReliableOrdered, pattern(65535)},
		{ReliableOrdered, pattern(MaxChanneledPayload)},     // 1,020: one plain Channeled packet
		{ReliableOrdered, pattern(MaxChanneledPayload - 2)}, // 1,018: still merged
		{Unreliable, pattern(MaxUnreliablePayload)},
		{Sequenced, pattern(MaxChanneledPayload)},
	}
	for _, m := range msgs {
		if err := p.Send(m.m, m.b); err != nil {
			t.Fatalf("send %v %d: %v", m.m, len(m.b), err)
		}
	}
	// The server learns of the peer with its first packet, then sees each
	// message once, with its method.
	srv.waitKind(t, "connected", 5*time.Second)
	seen := map[string]int{}
	for _, ev := range srv.collect(t, len(msgs), 10*time.Second) {
		seen[fmt.Sprintf("%v/%x", ev.m, ev.data)]++
	}
	for _, m := range msgs {
		if seen[fmt.Sprintf("%v/%x", m.m, m.b)] != 1 {
			t.Errorf("server got %v %d bytes %d times", m.m, len(m.b), seen[fmt.Sprintf("%v/%x", m.m, m.b)])
		}
	}
	// The echoes come back the same.
	got := cli.collect(t, len(msgs), 10*time.Second)
	var ro [][]byte
	for _, ev := range got {
		if ev.m == ReliableOrdered {
			ro = append(ro, ev.data)
		}
	}
	var wantRO [][]byte
	for _, m := range msgs {
		if m.m == ReliableOrdered {
			wantRO = append(wantRO, m.b)
		}
	}
	if len(ro) != len(wantRO) {
		t.Fatalf("client got %d ReliableOrdered messages, want %d", len(ro), len(wantRO))
	}
	for i := range ro {
		if !bytes.Equal(ro[i], wantRO[i]) {
			t.Fatalf("ReliableOrdered echo %d: %d bytes, want %d (out of order or damaged)", i, len(ro[i]), len(wantRO[i]))
		}
	}
}

// Messages too large for their method are refused, not truncated.
func TestSendRefusesOversize(t *testing.T) {
	e := listen(t, Config{Handler: newRecorder(false)})
	_, p := dial(t, e.LocalAddr(), Config{Handler: newRecorder(false)})
	cases := []struct {
		m Method
		n int
	}{
		{Unreliable, MaxUnreliablePayload + 1},
		{Sequenced, MaxChanneledPayload + 1},
		{ReliableSequenced, MaxChanneledPayload + 1},
		{ReliableOrdered, DefaultMaxMessage + 1},
		{Method(9), 1},
	}
	for _, c := range cases {
		if err := p.Send(c.m, make([]byte, c.n)); err != ErrTooBig {
			t.Errorf("Send(%v, %d bytes) = %v, want ErrTooBig", c.m, c.n, err)
		}
	}
}

// ReliableOrdered keeps order over many messages and sequence wrap-around
// of the window (several thousand packets).
func TestReliableOrderedLongStream(t *testing.T) { bothVersions(t, reliableOrderedLongStream) }

func reliableOrderedLongStream(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	_, p := dial(t, e.LocalAddr(), Config{Handler: newRecorder(false)})
	const n = 3000
	for i := range n {
		msg := fmt.Appendf(nil, "m%05d-%s", i, bytes.Repeat([]byte{'x'}, 400))
		if err := p.Send(ReliableOrdered, msg); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		ev := srv.waitKind(t, "recv", 10*time.Second)
		if want := fmt.Sprintf("m%05d-", i); string(ev.data[:7]) != want {
			t.Fatalf("message %d is %q", i, ev.data[:7])
		}
	}
}

// Closing gracefully delivers what is queued before Disconnect.
func TestGracefulCloseDeliversQueued(t *testing.T) { bothVersions(t, gracefulCloseDeliversQueued) }

func gracefulCloseDeliversQueued(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	_, p := dial(t, e.LocalAddr(), Config{Handler: newRecorder(false)})
	for i := range 50 {
		_ = p.Send(ReliableOrdered, fmt.Appendf(nil, "last-%d", i))
	}
	p.Close(true)
	for i := range 50 {
		ev := srv.waitKind(t, "recv", 5*time.Second)
		if string(ev.data) != fmt.Sprintf("last-%d", i) {
			t.Fatalf("got %q", ev.data)
		}
	}
	if ev := srv.waitKind(t, "disconnected", 5*time.Second); ev.why != ReasonRemote {
		t.Fatalf("server saw %v, want remote", ev.why)
	}
}
