package wire

import (
	"bytes"
	"testing"
)

// FuzzUDPMethod: PurrNet's UDP framing read for each sender. It refuses
// only with ErrBadMethod or ErrEmptyPayload; a method it finds is valid
// and where it says, and the packet with it taken out is the WebSocket
// form that re-encodes, with the method, to exactly the input.
func FuzzUDPMethod(f *testing.F) {
	for _, s := range [][]byte{
		AppendClientUDP(nil, Unreliable, []byte("p")), {2}, {},
		AppendSendOneUDP(nil, 7, Sequenced, []byte("p")), AppendSendOneUDP(nil, 7, 9, []byte("p")), AppendKick(nil, 7),
		AppendPipeUDP(nil, ReliableOrdered, 7, []byte("d")), {0xee, 7, 0, 0, 0},
	} {
		for from := range 3 {
			f.Add(uint8(from), s)
		}
	}
	f.Fuzz(func(t *testing.T, from uint8, p []byte) {
		s := Sender(from % 3)
		d, at, err := UDPMethod(s, p)
		switch {
		case err != nil:
			if err != ErrBadMethod && err != ErrEmptyPayload || at != -1 {
				t.Fatalf("refused with %v at %d", err, at)
			}
			return
		case at < 0:
			return
		case at >= len(p) || Delivery(p[at]) != d || !d.Valid():
			t.Fatalf("method %d at %d of % x", d, at, p)
		}
		ws := append(append([]byte(nil), p[:at]...), p[at+1:]...)
		var again []byte
		switch s {
		case FromClient:
			again = AppendClientUDP(nil, d, ws)
		case FromHost:
			h, err := ParseHostPacket(ws)
			if err != nil || h.Type != HostSendOne || len(h.Payload) == 0 {
				t.Fatalf("a SEND_ONE without its method % x: %v", ws, err)
			}
			again = AppendSendOneUDP(nil, h.Target, d, h.Payload)
		case FromPipe:
			again = append([]byte{byte(d)}, ws...)
		}
		if !bytes.Equal(again, p) {
			t.Fatalf("re-encoded % x, want % x", again, p)
		}
	})
}
