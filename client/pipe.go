package client

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/purrfly/purrfly/wire"
)

// Pipe is a pipe-mode peer: no room, no host, connection-id forwarding. See
// the package doc for which methods may run concurrently.
type Pipe struct {
	l  link        // static after DialPipe
	id wire.ConnID // static: the relay's [5][id:4] reply
}

// DialPipe connects to the relay WebSocket at url (ws://host:port) and
// authenticates with {"pipe":true}; the relay answers [5][id:4]. A 4 gives
// ErrAuthFailed. opts.URL and opts.NoSessionHint are ignored. With
// opts.Transport TransportUDP it connects over LiteNetLib to
// opts.UDPAddr instead (url is ignored).
func DialPipe(ctx context.Context, url string, opts *DialOptions) (*Pipe, error) {
	if opts == nil {
		opts = &DialOptions{}
	}
	var l link
	var reply []byte
	var err error
	if opts.Transport.UDP() {
		l, reply, err = dialPipeUDP(ctx, opts.UDPAddr, opts.Transport)
	} else {
		l, reply, _, err = authenticate(ctx, url, []byte(PipeAuthJSON), opts)
	}
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if len(reply) != 5 || reply[0] != wire.PipeAuthenticated {
		l.closeNow()
		return nil, fmt.Errorf("pipe: failed to authenticate: %w (%d bytes, first %#x)", ErrUnexpectedReply, len(reply), firstByte(reply))
	}
	return &Pipe{l: l, id: le32(reply[1:])}, nil
}

func dialPipeUDP(ctx context.Context, addr string, tr Transport) (link, []byte, error) {
	to, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid UDP address %q: %w", addr, err)
	}
	ctx, cancel := dialContext(ctx)
	defer cancel()
	u, err := dialUDP(ctx, to, tr, 0, false)
	if err != nil {
		return nil, nil, err
	}
	l, reply, _, err := exchangeAuth(ctx, u, []byte(PipeAuthJSON))
	return l, reply, err
}

// ID returns the connection id the relay gave this pipe.
func (p *Pipe) ID() wire.ConnID { return p.id }

// Send sends data to pipe peer target ([target:4][data]; over UDP
// [method][target:4][data], ReliableOrdered).
func (p *Pipe) Send(ctx context.Context, target wire.ConnID, data []byte) error {
	return p.SendWith(ctx, target, wire.ReliableOrdered, data)
}

// SendWith is Send with a delivery method (UDP; the peer receives the data
// with that method).
func (p *Pipe) SendWith(ctx context.Context, target wire.ConnID, d wire.Delivery, data []byte) error {
	head := 4
	if p.l.udp() {
		head = 5
	}
	if head+len(data) > wire.MaxMessageSize {
		return fmt.Errorf("failed to send to pipe %d: %w", target, ErrTooLarge)
	}
	err := writeFramed(ctx, p.l, d, func(dst []byte) []byte {
		if p.l.udp() {
			return wire.AppendPipeUDP(dst, d, target, data)
		}
		return wire.AppendPipe(dst, target, data)
	})
	if err != nil {
		return fmt.Errorf("failed to send to pipe %d: %w", target, err)
	}
	return nil
}

// Recv returns the next packet: the sender's id and its data.
func (p *Pipe) Recv(ctx context.Context) (wire.ConnID, []byte, error) {
	_, b, err := p.l.read(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to read from relay: %w", err)
	}
	from, data, err := wire.ParsePipe(b)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to decode pipe packet (%d bytes): %w", len(b), err)
	}
	return from, data, nil
}

// Close closes the pipe with a normal closure.
func (p *Pipe) Close() error { return p.l.close() }

// CloseNow drops the connection without a close handshake.
func (p *Pipe) CloseNow() error { return p.l.closeNow() }

// Raw returns an unchecked view of the same connection (WebSocket only;
// nil over UDP).
func (p *Pipe) Raw() *Raw { return rawOf(p.l) }
