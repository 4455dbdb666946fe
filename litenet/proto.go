package litenet

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"
)

// Property is a packet's type: bits 0 to 4 of its first byte.
type Property uint8

// The packet properties of LiteNetLib 2.x (docs/UDP.md, section 3).
const (
	PropUnreliable Property = iota
	PropChanneled
	PropReliableMerged
	PropAck
	PropPing
	PropPong
	PropConnectRequest
	PropConnectAccept
	PropDisconnect
	PropUnconnectedMessage
	PropMtuCheck
	PropMtuOk
	PropBroadcast
	PropMerged
	PropShutdownOk
	PropPeerNotFound
	PropInvalidProtocol
	PropNatMessage
	PropEmpty
	numProps
)

var propNames = [numProps]string{"Unreliable", "Channeled", "ReliableMerged", "Ack", "Ping", "Pong",
	"ConnectRequest", "ConnectAccept", "Disconnect", "UnconnectedMessage", "MtuCheck", "MtuOk", "Broadcast",
	"Merged", "ShutdownOk", "PeerNotFound", "InvalidProtocol", "NatMessage", "Empty"}

func (p Property) String() string {
	if p < numProps {
		return propNames[p]
	}
	return "Invalid"
}

// headerSizes is each property's fixed header, the first byte included
// (NetPacket.GetHeaderSize).
var headerSizes = [numProps]int{
	PropUnreliable: 1, PropChanneled: 4, PropReliableMerged: 4, PropAck: 4, PropPing: 3, PropPong: 11,
	PropConnectRequest: 18, PropConnectAccept: 15, PropDisconnect: 9,
	PropUnconnectedMessage: 1, PropMtuCheck: 1, PropMtuOk: 1, PropBroadcast: 1, PropMerged: 1,
	PropShutdownOk: 1, PropPeerNotFound: 1, PropInvalidProtocol: 1, PropNatMessage: 1, PropEmpty: 1,
}

// Method is LiteNetLib's DeliveryMethod. Its value is also the channel id of
// the method's channel (one channel per method: ChannelsCount 1).
type Method uint8

// The delivery methods, with LiteNetLib's values.
const (
	ReliableUnordered Method = 0
	Sequenced         Method = 1
	ReliableOrdered   Method = 2
	ReliableSequenced Method = 3
	Unreliable        Method = 4
	numMethods               = 5
)

var methodNames = [numMethods]string{"ReliableUnordered", "Sequenced", "ReliableOrdered", "ReliableSequenced", "Unreliable"}

func (m Method) String() string {
	if m < numMethods {
		return methodNames[m]
	}
	return "Invalid"
}

// Valid reports whether m is one of the five methods.
func (m Method) Valid() bool { return m < numMethods }

// Reliable reports whether m is delivered reliably.
func (m Method) Reliable() bool {
	return m == ReliableOrdered || m == ReliableUnordered || m == ReliableSequenced
}

// Fragments reports whether a message sent with m may span several packets
// (only the two reliable window channels reassemble).
func (m Method) Fragments() bool { return m == ReliableOrdered || m == ReliableUnordered }

// Protocol constants (NetConstants.cs).
const (
	// ProtocolID is what a ConnectRequest must carry; 1.x and 2.x share it.
	ProtocolID = 13
	// MTU is the packet size of every peer: LiteNetLib 2.x starts at 1024 and,
	// without MtuDiscovery (off by default, and off in PurrNet), stays there.
	MTU = 1024
	// MaxPacketSize is the largest datagram LiteNetLib sends (its largest MTU).
	MaxPacketSize = 1432
	// MaxUnreliablePayload and MaxChanneledPayload are the most user bytes one
	// packet carries at MTU: GetMaxSinglePacketSize.
	MaxUnreliablePayload = MTU - 1
	MaxChanneledPayload  = MTU - channeledHeader

	maxSequence      = 32768
	halfMaxSequence  = maxSequence / 2
	windowSize       = 64
	channeledHeader  = 4
	fragmentHeader   = 6
	fragmentedHeader = channeledHeader + fragmentHeader
	// fragmentPayload is the user bytes of one fragment at MTU (1014).
	fragmentPayload = MTU - channeledHeader - fragmentHeader
	maxConnNum      = 4
	ackPacketSize   = channeledHeader + (windowSize-1)/8 + 2 // 13
	seqAckSize      = channeledHeader                        // a ReliableSequenced ack: 4
	mergeThreshold  = 20
	// shutdownDelay is how often an unanswered Disconnect is repeated.
	shutdownDelay = 300 * time.Millisecond
)

// relSeq is LiteNetLib's RelativeSequenceNumber: a - b on the 15-bit
// sequence circle, in [-16384, 16383].
func relSeq(a, b int) int {
	return (a-b+maxSequence+halfMaxSequence)%maxSequence - halfMaxSequence
}

// header splits a packet's first byte.
func header(b0 byte) (p Property, connNum uint8, fragmented bool) {
	return Property(b0 & 0x1f), (b0 >> 5) & 3, b0&0x80 != 0
}

// verify is NetPacket.Verify: a known property, and at least its header
// (and the fragment header when the fragmented bit is set).
func verify(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	p, _, frag := header(b[0])
	if p >= numProps {
		return false
	}
	n := headerSizes[p]
	return len(b) >= n && (!frag || len(b) >= n+fragmentHeader)
}

// Errors of the parsers.
var (
	ErrShort     = errors.New("litenet: packet shorter than its header")
	ErrProtocol  = errors.New("litenet: wrong protocol id")
	ErrAddress   = errors.New("litenet: bad socket address")
	ErrKey       = errors.New("litenet: bad connect key")
	ErrBadPacket = errors.New("litenet: malformed packet")
)

// ticksEpoch is .NET's DateTime ticks (100 ns since 0001-01-01) at the Unix
// epoch. LiteNetLib's connect times and pong times are DateTime.UtcNow.Ticks.
const ticksEpoch = 621355968000000000

// Ticks converts t to .NET DateTime ticks.
func Ticks(t time.Time) int64 { return t.UnixNano()/100 + ticksEpoch }

// ConnectRequest is a parsed connect request (NetConnectRequestPacket).
type ConnectRequest struct {
	ConnNum     uint8
	ConnectTime int64          // the client's DateTime ticks: its connection's identity, echoed verbatim
	PeerID      int32          // the client's local peer id
	Target      netip.AddrPort // the server address as the client addressed it
	// Data is everything after the address: the connect key as a
	// NetDataWriter string (aliases the packet).
	Data []byte
}

// ParseConnectRequest parses b, a whole ConnectRequest datagram.
func ParseConnectRequest(b []byte) (ConnectRequest, error) {
	var r ConnectRequest
	if len(b) < headerSizes[PropConnectRequest] || Property(b[0]&0x1f) != PropConnectRequest {
		return r, ErrShort
	}
	if binary.LittleEndian.Uint32(b[1:]) != ProtocolID {
		return r, ErrProtocol
	}
	r.ConnNum = (b[0] >> 5) & 3
	r.ConnectTime = int64(binary.LittleEndian.Uint64(b[5:]))
	r.PeerID = int32(binary.LittleEndian.Uint32(b[13:]))
	n := int(b[17])
	if n != 16 && n != 28 || len(b) < 18+n {
		return r, ErrAddress
	}
	addr, err := parseSocketAddress(b[18 : 18+n])
	if err != nil {
		return r, err
	}
	r.Target = addr
	r.Data = b[18+n:]
	return r, nil
}

// Key returns the connect key carried by r (NetDataReader.GetString).
func (r ConnectRequest) Key() ([]byte, error) {
	s, _, err := readString(r.Data)
	return s, err
}

// AppendConnectRequest appends a ConnectRequest for target with key.
func AppendConnectRequest(dst []byte, connNum uint8, connectTime int64, peerID int32, target netip.AddrPort, key string) []byte {
	dst = append(dst, byte(PropConnectRequest)|connNum<<5)
	dst = binary.LittleEndian.AppendUint32(dst, ProtocolID)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(connectTime))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(peerID))
	sa := appendSocketAddress(nil, target)
	dst = append(dst, byte(len(sa)))
	dst = append(dst, sa...)
	return appendString(dst, key)
}

// AppendConnectAccept appends the 15-byte ConnectAccept: the request's
// connect time echoed verbatim, the connection number, flags 0 (so neither
// "network changed" nor PurrNet's repair extension is turned on) and the
// server's peer id.
func AppendConnectAccept(dst []byte, connectTime int64, connNum uint8, peerID int32) []byte {
	dst = append(dst, byte(PropConnectAccept))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(connectTime))
	dst = append(dst, connNum, 0)
	return binary.LittleEndian.AppendUint32(dst, uint32(peerID))
}

// ConnectAccept is a parsed accept (NetConnectAcceptPacket).
type ConnectAccept struct {
	ConnectTime int64
	ConnNum     uint8
	Reused      bool
	PeerID      int32
}

// ParseConnectAccept parses a 15-byte accept as a stock 2.1.2 client does.
func ParseConnectAccept(b []byte) (ConnectAccept, error) {
	var a ConnectAccept
	if len(b) != headerSizes[PropConnectAccept] || Property(b[0]&0x1f) != PropConnectAccept {
		return a, ErrShort
	}
	a.ConnectTime = int64(binary.LittleEndian.Uint64(b[1:]))
	a.ConnNum = b[9]
	a.PeerID = int32(binary.LittleEndian.Uint32(b[11:]))
	if a.ConnNum >= maxConnNum || b[10] > 1 || a.PeerID < 0 {
		return a, ErrBadPacket
	}
	a.Reused = b[10] == 1
	return a, nil
}

// AppendDisconnect appends a Disconnect for the connection of connectTime.
func AppendDisconnect(dst []byte, connNum uint8, connectTime int64) []byte {
	dst = append(dst, byte(PropDisconnect)|connNum<<5)
	return binary.LittleEndian.AppendUint64(dst, uint64(connectTime))
}

// parseSocketAddress reads a .NET SocketAddress serialization: family as a
// little-endian u16 (2 InterNetwork, 23 InterNetworkV6), port big-endian,
// then the IPv4 address and 8 zero bytes, or flow info, the IPv6 address
// and the scope id.
func parseSocketAddress(b []byte) (netip.AddrPort, error) {
	port := binary.BigEndian.Uint16(b[2:])
	switch fam := binary.LittleEndian.Uint16(b); {
	case fam == 2 && len(b) == 16:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), nil
	case fam == 23 && len(b) == 28:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port), nil
	}
	return netip.AddrPort{}, ErrAddress
}

func appendSocketAddress(dst []byte, a netip.AddrPort) []byte {
	ip := a.Addr().Unmap()
	if ip.Is4() {
		dst = binary.LittleEndian.AppendUint16(dst, 2)
		dst = binary.BigEndian.AppendUint16(dst, a.Port())
		v := ip.As4()
		dst = append(dst, v[:]...)
		return append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	dst = binary.LittleEndian.AppendUint16(dst, 23)
	dst = binary.BigEndian.AppendUint16(dst, a.Port())
	dst = append(dst, 0, 0, 0, 0)
	v := ip.As16()
	dst = append(dst, v[:]...)
	return append(dst, 0, 0, 0, 0)
}

// readString reads a NetDataWriter string: u16 (UTF-8 length + 1), 0 for
// the empty string, then the bytes. It returns the string's bytes
// (aliasing b) and the rest.
func readString(b []byte) (s, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, ErrKey
	}
	n := int(binary.LittleEndian.Uint16(b))
	if n == 0 {
		return b[:0:0], b[2:], nil
	}
	n--
	if len(b)-2 < n {
		return nil, nil, ErrKey
	}
	return b[2 : 2+n], b[2+n:], nil
}

func appendString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, 0, 0)
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)+1))
	return append(dst, s...)
}

// Packets splits a datagram into its packets: the inner packets of a
// Merged datagram, else the datagram itself (for tools and tests; it
// allocates the slice).
func Packets(b []byte) [][]byte {
	if len(b) == 0 || Property(b[0]&0x1f) != PropMerged {
		return [][]byte{b}
	}
	var out [][]byte
	for pos := 1; pos+2 <= len(b); {
		n := int(binary.LittleEndian.Uint16(b[pos:]))
		pos += 2
		if n == 0 || pos+n > len(b) {
			break
		}
		out = append(out, b[pos:pos+n])
		pos += n
	}
	return out
}
