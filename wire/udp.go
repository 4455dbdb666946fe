package wire

import "encoding/binary"

// PurrNet over UDP (docs/UDP.md section 2): each relay packet is one LiteNetLib
// message, and the framing carries LiteNetLib delivery methods.
//
//	client -> relay        [method][payload]               sent with that method
//	relay  -> host         [2][sender:4][payload]          with the client's method
//	host   -> relay        [1][target:4][method][payload]  SEND_ONE; [2][target:4] KICK
//	relay  -> client       payload                         with the host's method
//	pipe   -> relay        [method][target:4][data]        -> [sender:4][data] with that method
//
// The relay's own packets (notices, [3], [4], [5], [6]) go ReliableOrdered.
// Over WebSocket the same packets carry no method byte and everything is
// reliable and ordered.

// Delivery is a LiteNetLib delivery method as PurrNet's UDP framing carries
// it.
type Delivery uint8

// The delivery methods, with LiteNetLib's values.
const (
	ReliableUnordered Delivery = 0
	Sequenced         Delivery = 1
	ReliableOrdered   Delivery = 2
	ReliableSequenced Delivery = 3
	Unreliable        Delivery = 4
)

// Valid reports whether d is one of the five methods.
func (d Delivery) Valid() bool { return d <= Unreliable }

// AppendClientUDP appends a UDP client's packet: [method][payload].
func AppendClientUDP(dst []byte, d Delivery, payload []byte) []byte {
	return append(append(dst, byte(d)), payload...)
}

// AppendSendOneUDP appends a UDP host's SEND_ONE: [1][target:4][method][payload].
func AppendSendOneUDP(dst []byte, target ConnID, d Delivery, payload []byte) []byte {
	dst = append(dst, HostSendOne)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(target))
	return append(append(dst, byte(d)), payload...)
}

// AppendPipeUDP appends a UDP pipe packet: [method][target:4][data].
func AppendPipeUDP(dst []byte, d Delivery, target ConnID, data []byte) []byte {
	return AppendPipe(append(dst, byte(d)), target, data)
}

// HeaderLinkFraming on a link between two machines of a relay app
// (PathForward) says the forwarded connection speaks PurrNet's UDP framing
// (LinkFramingUDP): the holder then reads method bytes from it, and prefixes
// every frame it sends back with the frame's method, which the edge strips
// and sends the frame with.
const (
	HeaderLinkFraming = "purr-link-framing"
	LinkFramingUDP    = "udp"
)

// Sender is who sent a packet, which says where PurrNet's UDP framing
// carries its delivery method.
type Sender uint8

// The senders of packets that carry a delivery method.
const (
	FromClient Sender = iota // [method][payload]
	FromHost                 // SEND_ONE [1][target:4][method][payload]; KICK and keepalive carry none
	FromPipe                 // [method][target:4][data]
)

// UDPMethod finds the delivery method in p, a packet of PurrNet's UDP
// framing from sender: it returns the method and its index in p, or -1
// when p carries none for the relay to take out (a host's KICK or
// keepalive, and the packets that the parser of their WebSocket form
// refuses anyway: a client packet of one byte or less, a host packet
// shorter than its header or of an unknown type). With the method taken
// out, p is the packet's WebSocket form. ErrBadMethod: the byte is no
// method; ErrEmptyPayload: a SEND_ONE with nothing after its method.
func UDPMethod(from Sender, p []byte) (Delivery, int, error) {
	at := 0
	switch from {
	case FromClient:
		if len(p) <= 1 {
			return 0, -1, nil
		}
	case FromHost:
		if len(p) < 5 || p[0] != HostSendOne {
			return 0, -1, nil
		}
		if len(p) <= 6 {
			return 0, -1, ErrEmptyPayload
		}
		at = 5
	case FromPipe:
		if len(p) == 0 {
			return 0, -1, ErrBadMethod
		}
	}
	d := Delivery(p[at])
	if !d.Valid() {
		return 0, -1, ErrBadMethod
	}
	return d, at, nil
}
