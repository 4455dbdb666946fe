package litenet

import (
	"encoding/binary"
	"net/netip"
)

// NAT introduction (NatPunchModule.cs). A NatMessage datagram is 0x11 then
// packets of LiteNetLib's NetPacketProcessor: a u64 type hash (FNV-1a over
// the UTF-16 code units of the C# type name) and the type's properties in
// declaration order: IPEndPoint as u8 family (0 IPv4, 1 IPv6), the
// address and a u16 port; string as u16 (UTF-8 length + 1) and the bytes;
// bool as one byte. Two peers that want a direct path each send a request
// with their internal address and a shared token to the mediator (the
// relay), which answers each with the other's internal and external
// addresses; they then punch to each other. NatMessages are handled before
// the peer lookup, so they may come from the address of a connection.

// NatKind is the type of a NAT packet.
type NatKind uint8

// The NAT packet types.
const (
	NatRequest  NatKind = iota + 1 // NatIntroduceRequestPacket{Internal, Token}
	NatResponse                    // NatIntroduceResponsePacket{Internal, External, Token}
	NatPunch                       // NatPunchPacket{Token, IsExternal}
)

// MaxNatToken is NatPunchModule.MaxTokenLength (characters).
const MaxNatToken = 256

// NatPacket is one parsed NAT packet. Token aliases the datagram.
type NatPacket struct {
	Kind       NatKind
	Internal   netip.AddrPort
	External   netip.AddrPort
	Token      []byte
	IsExternal bool
}

func typeHash(name string) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range name { // ASCII: one UTF-16 code unit each
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

var (
	hashRequest  = typeHash("LiteNetLib.NatPunchModule+NatIntroduceRequestPacket")
	hashResponse = typeHash("LiteNetLib.NatPunchModule+NatIntroduceResponsePacket")
	hashPunch    = typeHash("LiteNetLib.NatPunchModule+NatPunchPacket")
)

// ParseNat calls fn for every packet of a NatMessage datagram b (its
// first byte included) and stops at the first malformed one, returning
// ErrBadPacket.
func ParseNat(b []byte, fn func(NatPacket)) error {
	if len(b) < 1 || Property(b[0]&0x1f) != PropNatMessage {
		return ErrBadPacket
	}
	for rest := b[1:]; len(rest) > 0; {
		if len(rest) < 8 {
			return ErrBadPacket
		}
		var n NatPacket
		var err error
		h := binary.LittleEndian.Uint64(rest)
		rest = rest[8:]
		switch h {
		case hashRequest:
			n.Kind = NatRequest
			if n.Internal, rest, err = readEndPoint(rest); err == nil {
				n.Token, rest, err = readToken(rest)
			}
		case hashResponse:
			n.Kind = NatResponse
			if n.Internal, rest, err = readEndPoint(rest); err == nil {
				if n.External, rest, err = readEndPoint(rest); err == nil {
					n.Token, rest, err = readToken(rest)
				}
			}
		case hashPunch:
			n.Kind = NatPunch
			if n.Token, rest, err = readToken(rest); err == nil {
				if len(rest) < 1 {
					err = ErrBadPacket
				} else {
					n.IsExternal, rest = rest[0] != 0, rest[1:]
				}
			}
		default:
			return ErrBadPacket // NetPacketProcessor: "Undefined packet"
		}
		if err != nil {
			return ErrBadPacket
		}
		fn(n)
	}
	return nil
}

func readEndPoint(b []byte) (netip.AddrPort, []byte, error) {
	if len(b) < 1 {
		return netip.AddrPort{}, nil, ErrBadPacket
	}
	switch b[0] {
	case 0:
		if len(b) < 1+4+2 {
			return netip.AddrPort{}, nil, ErrBadPacket
		}
		a := netip.AddrFrom4([4]byte(b[1:5]))
		return netip.AddrPortFrom(a, binary.LittleEndian.Uint16(b[5:])), b[7:], nil
	case 1:
		if len(b) < 1+16+2 {
			return netip.AddrPort{}, nil, ErrBadPacket
		}
		a := netip.AddrFrom16([16]byte(b[1:17]))
		return netip.AddrPortFrom(a, binary.LittleEndian.Uint16(b[17:])), b[19:], nil
	}
	return netip.AddrPort{}, nil, ErrBadPacket
}

func readToken(b []byte) ([]byte, []byte, error) {
	s, rest, err := readString(b)
	if err != nil || len(s) > 4*MaxNatToken {
		return nil, nil, ErrBadPacket
	}
	return s, rest, nil
}

func appendEndPoint(dst []byte, a netip.AddrPort) []byte {
	if ip := a.Addr().Unmap(); ip.Is4() {
		v := ip.As4()
		dst = append(append(dst, 0), v[:]...)
	} else {
		v := ip.As16()
		dst = append(append(dst, 1), v[:]...)
	}
	return binary.LittleEndian.AppendUint16(dst, a.Port())
}

// AppendNatRequest appends a NatMessage datagram holding one introduce
// request.
func AppendNatRequest(dst []byte, internal netip.AddrPort, token string) []byte {
	dst = binary.LittleEndian.AppendUint64(append(dst, byte(PropNatMessage)), hashRequest)
	return appendString(appendEndPoint(dst, internal), token)
}

// AppendNatResponse appends a NatMessage datagram holding one introduce
// response.
func AppendNatResponse(dst []byte, internal, external netip.AddrPort, token []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(append(dst, byte(PropNatMessage)), hashResponse)
	return appendString(appendEndPoint(appendEndPoint(dst, internal), external), string(token))
}

// AppendNatPunch appends a NatMessage datagram holding one punch.
func AppendNatPunch(dst []byte, token string, external bool) []byte {
	dst = binary.LittleEndian.AppendUint64(append(dst, byte(PropNatMessage)), hashPunch)
	dst = appendString(dst, token)
	if external {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// nat hands every packet of a NatMessage to the Handler.
func (s *socket) nat(addr netip.AddrPort, b []byte) {
	if err := ParseNat(b, func(n NatPacket) { s.e.h.Nat(addr, n) }); err != nil {
		s.e.stats.malformed.Add(1)
	}
}

// NatIntroduce introduces a host and a client that both asked with token
// (NatPunchModule.NatIntroduce): the client's external address gets the
// host's addresses, the host's gets the client's.
func (e *Endpoint) NatIntroduce(hostInternal, hostExternal, clientInternal, clientExternal netip.AddrPort, token []byte) {
	var b [2 * (1 + 8 + 19 + 19 + 2 + 4*MaxNatToken)]byte
	c := e.socks[0].c
	_, _ = c.WriteToUDPAddrPort(AppendNatResponse(b[:0], hostInternal, hostExternal, token), clientExternal)
	_, _ = c.WriteToUDPAddrPort(AppendNatResponse(b[:0], clientInternal, clientExternal, token), hostExternal)
}

// WriteTo sends one raw datagram from the endpoint's socket (NAT packets
// of a client; tests).
func (e *Endpoint) WriteTo(b []byte, to netip.AddrPort) error {
	_, err := e.socks[0].c.WriteToUDPAddrPort(b, to)
	return err
}
