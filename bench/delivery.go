package bench

import (
	"time"

	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// Delivery names the LiteNetLib delivery method a UDP run's load sends
// with (`--delivery`). Over WebSocket everything is reliable and ordered
// and there is no choice.
type Delivery string

// The delivery methods by their flag names.
const (
	DeliveryReliableOrdered   Delivery = "ro"
	DeliveryReliableUnordered Delivery = "ru"
	DeliverySequenced         Delivery = "seq"
	DeliveryReliableSequenced Delivery = "rs"
	DeliveryUnreliable        Delivery = "unrel"
)

// DefaultUDPDelivery is a UDP run's method: what a game sends most of at
// its tick rate is state (positions, inputs), which PurrNet sends
// unreliable; events and RPCs go ReliableOrdered, measured with --delivery
// ro. Unreliable is also the like-for-like comparison with the echo
// baseline: per message both servers read one datagram and write one,
// with no acknowledgements on either side.
const DefaultUDPDelivery = DeliveryUnreliable

// DefaultPeerFlush is how long a UDP load peer's sends wait to leave
// merged: PurrNet's client (LiteNetLib in manual mode) sends once per
// network tick, and 10 ms is a shorter tick than any game's (a 100 Hz
// tick), so the load merges no more than a real game's players do.
const DefaultPeerFlush = 10 * time.Millisecond

var deliveryMethods = map[Delivery]wire.Delivery{
	DeliveryReliableOrdered:   wire.ReliableOrdered,
	DeliveryReliableUnordered: wire.ReliableUnordered,
	DeliverySequenced:         wire.Sequenced,
	DeliveryReliableSequenced: wire.ReliableSequenced,
	DeliveryUnreliable:        wire.Unreliable,
}

// method is d's delivery method; ok is false for an unknown name.
func (d Delivery) method() (m wire.Delivery, ok bool) {
	m, ok = deliveryMethods[d]
	return m, ok
}

// String is LiteNetLib's name of the method ("Unreliable").
func (d Delivery) String() string {
	m, ok := d.method()
	if !ok {
		return string(d)
	}
	return litenet.Method(m).String()
}

// Sizes of the UDP framing, in bytes.
const (
	// udpFrameHead is the most PurrNet adds to a payload on its way
	// through the relay: a host's SEND_ONE [1][target:4][method].
	udpFrameHead = 6
	// maxDatagram is the largest UDP payload over IPv4 (the baseline
	// sends each message as one datagram).
	maxDatagram = 65507
	// maxLNLHeader is LiteNetLib's longest packet header the baseline
	// imitates (a channeled packet's).
	maxLNLHeader = litenet.MTU - litenet.MaxChanneledPayload
	// MaxUDPSize is the largest payload of a UDP run: the baseline's
	// datagram (header and framing included) must fit one IPv4 datagram.
	MaxUDPSize = maxDatagram - maxLNLHeader - udpFrameHead
)

// maxUnfragmented is the largest payload method m carries through the
// relay without LiteNetLib fragmenting it, which only the two reliable
// window methods can; 0 means any size up to MaxUDPSize.
func maxUnfragmented(m wire.Delivery) int {
	switch litenet.Method(m) {
	case litenet.ReliableOrdered, litenet.ReliableUnordered:
		return 0
	case litenet.Unreliable:
		return litenet.MaxUnreliablePayload - udpFrameHead
	}
	return litenet.MaxChanneledPayload - udpFrameHead
}

// lnlHeader is the header LiteNetLib puts before each message sent with m
// when it travels alone in its datagram: the property byte, and for a
// channeled method its sequence number (2 bytes) and channel id.
func lnlHeader(m wire.Delivery) []byte {
	if litenet.Method(m) == litenet.Unreliable {
		return []byte{byte(litenet.PropUnreliable)}
	}
	return []byte{byte(litenet.PropChanneled), 0, 0, byte(m)}
}
