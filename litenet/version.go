package litenet

import "encoding/binary"

// Version is the LiteNetLib wire version an Endpoint speaks. The engine
// is one: channels, fragments, timers and sockets work in 2.x's packet
// numbering, and a 1.x endpoint renumbers byte 0 of every packet at the
// socket's edge (docs/LITENETLIB-1.md).
type Version uint8

// The wire versions.
const (
	// V2 is LiteNetLib 2.x (2.1.2), the default.
	V2 Version = iota
	// V1 is LiteNetLib 1.x (1.3.1): the same packets without
	// ReliableMerged, so every property from Ack up is one lower, and
	// every reliable message is a Channeled packet of its own.
	V1
)

func (v Version) String() string {
	if v == V1 {
		return "1.x"
	}
	return "2.x"
}

// v1In maps a 1.x property to the engine's (2.x) one; v1Out the reverse.
// A 1.x property past Empty maps to 0x1f, which verify refuses, as
// 1.x's Verify does. The engine never hands ReliableMerged to a 1.x
// socket (relChan.merge is off); should it, it leaves as 0x1f, a
// packet every 1.x receiver drops.
var v1In, v1Out = v1Tables()

func v1Tables() (in, out [32]byte) {
	for i := range 32 {
		in[i], out[i] = 0x1f, 0x1f
	}
	for p := range numProps {
		switch {
		case p < PropReliableMerged:
			in[p], out[p] = byte(p), byte(p)
		case p > PropReliableMerged:
			in[p-1], out[p] = byte(p), byte(p-1)
		}
	}
	return in, out
}

// toV1 renumbers the property of an outgoing packet's first byte.
func toV1(b0 byte) byte { return b0&0xe0 | v1Out[b0&0x1f] }

// fromV1 renumbers, in place, the first byte of a received 1.x datagram
// and, when it is Merged, of each packet inside it (up to the first bad
// length, where the engine stops reading too).
func fromV1(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = b[0]&0xe0 | v1In[b[0]&0x1f]
	if Property(b[0]&0x1f) != PropMerged {
		return
	}
	for pos := 1; pos+2 <= len(b); {
		n := int(binary.LittleEndian.Uint16(b[pos:]))
		pos += 2
		if n == 0 || len(b)-pos < n {
			return
		}
		b[pos] = b[pos]&0xe0 | v1In[b[pos]&0x1f]
		pos += n
	}
}

// ToWire renumbers, in place, a datagram the engine numbers as 2.x (as
// the Append functions write them) into v's numbering: byte 0 and, for
// Merged, each inner packet's. Tools and tests use it; the endpoint
// renumbers as it writes.
func ToWire(v Version, b []byte) {
	if v != V1 || len(b) == 0 {
		return
	}
	merged := Property(b[0]&0x1f) == PropMerged
	b[0] = toV1(b[0])
	if !merged {
		return
	}
	for pos := 1; pos+2 <= len(b); {
		n := int(binary.LittleEndian.Uint16(b[pos:]))
		pos += 2
		if n == 0 || len(b)-pos < n {
			return
		}
		b[pos] = toV1(b[pos])
		pos += n
	}
}

// FromWire renumbers, in place, a datagram in v's numbering into the
// engine's (2.x), so that Packets and the Parse functions read it.
func FromWire(v Version, b []byte) {
	if v == V1 {
		fromV1(b)
	}
}

// is2xConnectRequest reports whether b, a ConnectAccept to a 1.x server
// from an address with no connection (1.x's property 6, which no 1.x peer
// sends a server), is a 2.x client's ConnectRequest (2.x's property 6):
// protocol id 13 and a socket address of a plausible size. A 1.x server answers it with 2.x's
// InvalidProtocol byte, so that a 2.x client given the wrong port fails
// at once with InvalidProtocol rather than after its connect attempts.
func is2xConnectRequest(b []byte) bool {
	return len(b) >= headerSizes[PropConnectRequest]+16 &&
		binary.LittleEndian.Uint32(b[1:]) == ProtocolID && (b[17] == 16 || b[17] == 28)
}
