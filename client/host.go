package client

import (
	"context"
	"fmt"
	"time"

	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// Host is a room's host connection. See the package doc for which methods may
// run concurrently.
type Host struct {
	l    link   // static after DialHost
	room string // static
}

// DialHost connects to the relay of capability c (from Allocate) as the host
// of room, sends the authentication message and waits for the relay's 3.
// A 4 gives ErrAuthFailed. Without a deadline on ctx, DefaultDialTimeout
// bounds the whole exchange.
func DialHost(ctx context.Context, c wire.Capability, room string, opts *DialOptions) (*Host, error) {
	l, _, err := authRoom(ctx, c, room, opts)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	return &Host{l: l, room: room}, nil
}

// Room returns the room name the host authenticated for.
func (h *Host) Room() string { return h.room }

// SendOne delivers payload to client target of the room ([1][target:4][payload]),
// ReliableOrdered over UDP. The whole message must fit wire.MaxMessageSize,
// else ErrTooLarge.
func (h *Host) SendOne(ctx context.Context, target wire.ConnID, payload []byte) error {
	return h.SendOneWith(ctx, target, wire.ReliableOrdered, payload)
}

// SendOneWith is SendOne with a delivery method: over UDP the packet is
// [1][target:4][method][payload], sent with that method, and the client
// receives it with that method; over WebSocket d is ignored.
func (h *Host) SendOneWith(ctx context.Context, target wire.ConnID, d wire.Delivery, payload []byte) error {
	head := 5
	if h.l.udp() {
		head = 6
	}
	if head+len(payload) > wire.MaxMessageSize {
		return fmt.Errorf("failed to send to %d: %w", target, ErrTooLarge)
	}
	err := writeFramed(ctx, h.l, d, func(dst []byte) []byte {
		if h.l.udp() {
			return wire.AppendSendOneUDP(dst, target, d, payload)
		}
		return wire.AppendSendOne(dst, target, payload)
	})
	if err != nil {
		return fmt.Errorf("failed to send to %d: %w", target, err)
	}
	return nil
}

// Kick asks the relay to disconnect client target ([2][target:4];
// ReliableSequenced over UDP, as PurrNet sends it).
func (h *Host) Kick(ctx context.Context, target wire.ConnID) error {
	var a [5]byte
	if err := h.l.write(ctx, wire.ReliableSequenced, wire.AppendKick(a[:0], target)); err != nil {
		return fmt.Errorf("failed to kick %d: %w", target, err)
	}
	return nil
}

// KeepAlive sends the host keepalive ([0]); the relay ignores it.
func (h *Host) KeepAlive(ctx context.Context) error {
	if err := h.l.write(ctx, wire.ReliableOrdered, []byte{wire.HostKeepAlive}); err != nil {
		return fmt.Errorf("failed to send keepalive: %w", err)
	}
	return nil
}

// WriteRaw sends b as one message, unframed (for tests of unknown or
// truncated packets), ReliableOrdered over UDP. It refuses more than
// wire.MaxMessageSize; use Raw for oversized messages.
func (h *Host) WriteRaw(ctx context.Context, b []byte) error {
	return h.WriteRawWith(ctx, wire.ReliableOrdered, b)
}

// WriteRawWith is WriteRaw with a delivery method (UDP).
func (h *Host) WriteRawWith(ctx context.Context, d wire.Delivery, b []byte) error {
	if len(b) > wire.MaxMessageSize {
		return ErrTooLarge
	}
	return h.l.write(ctx, d, b)
}

// Next reads and decodes the next relay -> host packet. The packet owns its
// memory. A packet that does not decode is returned as an error wrapping the
// wire error (wire.ErrUnknownPacket, wire.ErrTruncatedPacket, ...).
func (h *Host) Next(ctx context.Context) (wire.ToHostPacket, error) {
	p, _, err := h.NextWith(ctx)
	return p, err
}

// NextWith is Next that also returns the delivery method the packet came
// with (UDP: a client's data comes with the client's method; always
// ReliableOrdered over WebSocket).
func (h *Host) NextWith(ctx context.Context) (wire.ToHostPacket, wire.Delivery, error) {
	d, b, err := h.l.read(ctx)
	if err != nil {
		return wire.ToHostPacket{}, d, fmt.Errorf("failed to read from relay: %w", err)
	}
	p, err := wire.ParseToHostPacket(b)
	if err != nil {
		return wire.ToHostPacket{}, d, fmt.Errorf("failed to decode relay packet (type %#x, %d bytes): %w", firstByte(b), len(b), err)
	}
	return p, d, nil
}

// NextInto reads the next relay -> host packet into buf without allocating
// and decodes it. The Event aliases buf: it is valid until buf is reused.
// Make buf ReadLimit bytes long to accept every message. With a context
// that has no Done channel (context.Background) it allocates nothing over
// WebSocket; a cancellable context costs coder/websocket one timer
// registration per read.
func (h *Host) NextInto(ctx context.Context, buf []byte) (Event, error) {
	d, n, err := h.l.readInto(ctx, buf)
	if err != nil {
		return Event{}, fmt.Errorf("failed to read from relay: %w", err)
	}
	e, err := ParseEvent(buf[:n])
	e.Delivery = d
	return e, err
}

// ReadRaw reads the next message as it is, undecoded.
func (h *Host) ReadRaw(ctx context.Context) ([]byte, error) {
	_, b, err := h.l.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read from relay: %w", err)
	}
	return b, nil
}

// Close leaves the room with a normal closure (over UDP: a Disconnect once
// what was sent is acknowledged) and waits for the relay's answer
// (bounded). The relay then disconnects the room's clients. A connection
// the relay already closed gives nil.
func (h *Host) Close() error { return h.l.close() }

// CloseNow drops the connection without a close handshake.
func (h *Host) CloseNow() error { return h.l.closeNow() }

// Transport is how the host reaches the relay.
func (h *Host) Transport() Transport { return transportOf(h.l) }

// Raw returns an unchecked view of the same connection (WebSocket only;
// nil over UDP).
func (h *Host) Raw() *Raw { return rawOf(h.l) }

// NATIntroduce asks the relay, over the host's own UDP socket as PurrNet
// does, to introduce it to the client a [6][token] named, and returns the
// introduction (the client's addresses). UDP only.
func (h *Host) NATIntroduce(ctx context.Context, token string) (litenet.NatPacket, error) {
	return natIntroduce(ctx, h.l, token)
}

// Event is one relay -> host packet decoded without allocation by NextInto.
type Event struct {
	// Type is one of wire.ToHostConnected, ToHostDisconnected, ToHostData,
	// ToHostNATIntroduce.
	Type byte
	// ID is the client of Disconnected and Data, and the first client of
	// Connected (see IDs for all of them).
	ID wire.ConnID
	// Payload is a Data packet's payload or a NATIntroduce token.
	Payload []byte
	// Delivery is the method the packet came with (UDP).
	Delivery wire.Delivery
	// Arrival is when the kernel received the datagram that delivered the
	// packet (OnEvent with DialOptions.UDPArrivals; else zero).
	Arrival time.Time
	ids     []byte // Connected: 4 bytes per id
}

// Count returns the number of client ids the event carries.
func (e Event) Count() int {
	if e.Type == wire.ToHostConnected {
		return len(e.ids) / 4
	}
	if e.Type == wire.ToHostDisconnected || e.Type == wire.ToHostData {
		return 1
	}
	return 0
}

// AppendIDs appends the event's client ids to dst.
func (e Event) AppendIDs(dst []wire.ConnID) []wire.ConnID {
	if e.Type != wire.ToHostConnected {
		if e.Count() == 1 {
			dst = append(dst, e.ID)
		}
		return dst
	}
	for i := 0; i+4 <= len(e.ids); i += 4 {
		dst = append(dst, le32(e.ids[i:]))
	}
	return dst
}

// ParseEvent decodes a relay -> host packet like wire.ParseToHostPacket, but
// without allocating: the Event aliases b.
func ParseEvent(b []byte) (Event, error) {
	if len(b) == 0 {
		return Event{}, wire.ErrEmptyPacket
	}
	e := Event{Type: b[0]}
	switch b[0] {
	case wire.ToHostConnected:
		if len(b) == 1 || (len(b)-1)%4 != 0 {
			return Event{}, wire.ErrTruncatedPacket
		}
		e.ID, e.ids = le32(b[1:]), b[1:]
	case wire.ToHostDisconnected:
		if len(b) != 5 {
			return Event{}, wire.ErrTruncatedPacket
		}
		e.ID = le32(b[1:])
	case wire.ToHostData:
		if len(b) < 5 {
			return Event{}, wire.ErrTruncatedPacket
		}
		e.ID, e.Payload = le32(b[1:]), b[5:]
	case wire.ToHostNATIntroduce:
		e.Payload = b[1:]
	default:
		return Event{}, wire.ErrUnknownPacket
	}
	return e, nil
}
