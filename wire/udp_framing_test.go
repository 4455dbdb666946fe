package wire

import (
	"bytes"
	"testing"
)

// Rule: the five LiteNetLib delivery methods are 0..4; anything above is
// not a method.
func TestDeliveryValid(t *testing.T) {
	for d := Delivery(0); d < 10; d++ {
		if got, want := d.Valid(), d <= Unreliable; got != want {
			t.Errorf("Delivery(%d).Valid() = %v, want %v", d, got, want)
		}
	}
}

// Rule: UDP framing puts the method byte first for clients and pipes and
// after the target for a host's SEND_ONE (docs/UDP.md section 2).
func TestUDPFramingLayouts(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"client", AppendClientUDP(nil, Unreliable, []byte("p")), []byte{4, 'p'}},
		{"send one", AppendSendOneUDP(nil, 0x0102, Sequenced, []byte("p")), []byte{1, 2, 1, 0, 0, 1, 'p'}},
		{"pipe", AppendPipeUDP(nil, ReliableOrdered, 7, []byte("d")), []byte{2, 7, 0, 0, 0, 'd'}},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: % x, want % x", c.name, c.got, c.want)
		}
	}
}

// Rule: the relay finds a UDP packet's method where its sender puts it,
// refuses a byte that is no method and a SEND_ONE with nothing after its
// method, and leaves what carries none (or what the WebSocket form's
// parser refuses) for that parser.
func TestUDPMethod(t *testing.T) {
	for _, c := range []struct {
		name string
		from Sender
		p    []byte
		d    Delivery
		at   int
		err  error
	}{
		{"client", FromClient, AppendClientUDP(nil, Unreliable, []byte("p")), Unreliable, 0, nil},
		{"client, one byte", FromClient, []byte{2}, 0, -1, nil},
		{"client, empty", FromClient, nil, 0, -1, nil},
		{"client, no method", FromClient, []byte{5, 'p'}, 0, -1, ErrBadMethod},
		{"send one", FromHost, AppendSendOneUDP(nil, 7, Sequenced, []byte("p")), Sequenced, 5, nil},
		{"send one, method only", FromHost, AppendSendOneUDP(nil, 7, Sequenced, nil), 0, -1, ErrEmptyPayload},
		{"send one, no method", FromHost, AppendSendOne(nil, 7, nil), 0, -1, ErrEmptyPayload},
		{"send one, bad method", FromHost, AppendSendOneUDP(nil, 7, 9, []byte("p")), 0, -1, ErrBadMethod},
		{"send one, truncated", FromHost, []byte{HostSendOne, 1, 2}, 0, -1, nil},
		{"kick", FromHost, AppendKick(nil, 7), 0, -1, nil},
		{"keepalive", FromHost, []byte{HostKeepAlive}, 0, -1, nil},
		{"pipe", FromPipe, AppendPipeUDP(nil, ReliableOrdered, 7, []byte("d")), ReliableOrdered, 0, nil},
		{"pipe, method only", FromPipe, []byte{byte(ReliableOrdered)}, ReliableOrdered, 0, nil},
		{"pipe, empty", FromPipe, nil, 0, -1, ErrBadMethod},
		{"pipe, bad method", FromPipe, []byte{0xee, 7, 0, 0, 0}, 0, -1, ErrBadMethod},
	} {
		d, at, err := UDPMethod(c.from, c.p)
		if d != c.d || at != c.at || err != c.err {
			t.Errorf("%s: %d at %d (%v), want %d at %d (%v)", c.name, d, at, err, c.d, c.at, c.err)
		}
	}
}
