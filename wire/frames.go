package wire

import "encoding/binary"

// MaxMessageSize is the largest WebSocket message PurrNet sends or accepts.
const MaxMessageSize = 65535

// ConnID identifies one connection within a relay process. IDs are positive and
// unique per process, whatever the transport.
type ConnID uint32

// Authentication replies, sent by the relay as a one-byte message (or, for a
// pipe, [PipeAuthenticated][connId:4]).
const (
	Authenticated     byte = 3
	AuthFailed        byte = 4
	PipeAuthenticated byte = 5
)

// Host -> relay packet types.
const (
	HostKeepAlive byte = 0 // [0]
	HostSendOne   byte = 1 // [1][target:4][payload]
	HostKick      byte = 2 // [2][target:4]
)

// Relay -> host packet types.
const (
	ToHostConnected    byte = 0 // [0][id:4][id:4]...
	ToHostDisconnected byte = 1 // [1][id:4]
	ToHostData         byte = 2 // [2][sender:4][payload]
	ToHostNATIntroduce byte = 6 // [6][utf-8 token]
)

// HostPacket is one decoded host -> relay packet. Payload aliases the input.
type HostPacket struct {
	Type    byte
	Target  ConnID
	Payload []byte
}

// ParseHostPacket decodes a host -> relay packet without copying. It rejects
// empty and unknown packets and a SEND_ONE or KICK shorter than its header.
func ParseHostPacket(b []byte) (HostPacket, error) {
	if len(b) == 0 {
		return HostPacket{}, ErrEmptyPacket
	}
	switch b[0] {
	case HostKeepAlive:
		return HostPacket{Type: HostKeepAlive}, nil
	case HostSendOne, HostKick:
		if len(b) < 5 {
			return HostPacket{}, ErrTruncatedPacket
		}
		p := HostPacket{Type: b[0], Target: ConnID(binary.LittleEndian.Uint32(b[1:5]))}
		if b[0] == HostSendOne {
			p.Payload = b[5:]
		} else if len(b) != 5 {
			return HostPacket{}, ErrTruncatedPacket
		}
		return p, nil
	default:
		return HostPacket{}, ErrUnknownPacket
	}
}

// AppendSendOne appends a host -> relay SEND_ONE packet.
func AppendSendOne(dst []byte, target ConnID, payload []byte) []byte {
	dst = append(dst, HostSendOne)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(target))
	return append(dst, payload...)
}

// AppendKick appends a host -> relay KICK packet.
func AppendKick(dst []byte, target ConnID) []byte {
	dst = append(dst, HostKick)
	return binary.LittleEndian.AppendUint32(dst, uint32(target))
}

// AppendConnected appends a relay -> host "clients connected" packet.
func AppendConnected(dst []byte, ids ...ConnID) []byte {
	dst = append(dst, ToHostConnected)
	for _, id := range ids {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(id))
	}
	return dst
}

// AppendDisconnected appends a relay -> host "client disconnected" packet.
func AppendDisconnected(dst []byte, id ConnID) []byte {
	dst = append(dst, ToHostDisconnected)
	return binary.LittleEndian.AppendUint32(dst, uint32(id))
}

// AppendHostData appends a relay -> host data packet from client sender.
func AppendHostData(dst []byte, sender ConnID, payload []byte) []byte {
	dst = append(dst, ToHostData)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(sender))
	return append(dst, payload...)
}

// AppendPipeAuthenticated appends the pipe-mode authentication reply.
func AppendPipeAuthenticated(dst []byte, id ConnID) []byte {
	dst = append(dst, PipeAuthenticated)
	return binary.LittleEndian.AppendUint32(dst, uint32(id))
}

// AppendPipe appends a pipe packet: [peer:4][data]. Pipe peers send the target
// id and receive the sender id in the same place.
func AppendPipe(dst []byte, peer ConnID, data []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(peer))
	return append(dst, data...)
}

// ParsePipe splits a pipe packet into its peer id and data (aliasing b).
func ParsePipe(b []byte) (ConnID, []byte, error) {
	if len(b) < 4 {
		return 0, nil, ErrTruncatedPacket
	}
	return ConnID(binary.LittleEndian.Uint32(b)), b[4:], nil
}

// ToHostPacket is one decoded relay -> host packet. IDs and Payload alias the
// input only through Payload; IDs is freshly allocated (client side only).
type ToHostPacket struct {
	Type    byte
	IDs     []ConnID // Connected: every id; Disconnected and Data: the one id
	Payload []byte   // Data: the client's payload; NATIntroduce: the token
}

// ParseToHostPacket decodes a relay -> host packet (used by clients and tests).
func ParseToHostPacket(b []byte) (ToHostPacket, error) {
	if len(b) == 0 {
		return ToHostPacket{}, ErrEmptyPacket
	}
	p := ToHostPacket{Type: b[0]}
	switch b[0] {
	case ToHostConnected:
		if (len(b)-1)%4 != 0 || len(b) == 1 {
			return ToHostPacket{}, ErrTruncatedPacket
		}
		for i := 1; i < len(b); i += 4 {
			p.IDs = append(p.IDs, ConnID(binary.LittleEndian.Uint32(b[i:])))
		}
	case ToHostDisconnected:
		if len(b) != 5 {
			return ToHostPacket{}, ErrTruncatedPacket
		}
		p.IDs = []ConnID{ConnID(binary.LittleEndian.Uint32(b[1:]))}
	case ToHostData:
		if len(b) < 5 {
			return ToHostPacket{}, ErrTruncatedPacket
		}
		p.IDs = []ConnID{ConnID(binary.LittleEndian.Uint32(b[1:]))}
		p.Payload = b[5:]
	case ToHostNATIntroduce:
		p.Payload = b[1:]
	default:
		return ToHostPacket{}, ErrUnknownPacket
	}
	return p, nil
}
