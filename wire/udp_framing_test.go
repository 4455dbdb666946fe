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
