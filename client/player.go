package client

import (
	"context"
	"fmt"

	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// Client is an ordinary player of a room. See the package doc for which
// methods may run concurrently.
type Client struct {
	l     link   // static after DialClient
	room  string // static
	token string // static: the NAT introduction token the relay sent before [3], if any
}

// DialClient connects to the relay of capability c (from Join) as a client of
// room, sends the authentication message and waits for the relay's 3. A 4
// gives ErrAuthFailed. Without a deadline on ctx, DefaultDialTimeout bounds
// the whole exchange. A client never learns its own id: the host sees it.
func DialClient(ctx context.Context, c wire.Capability, room string, opts *DialOptions) (*Client, error) {
	l, token, err := authRoom(ctx, c, room, opts)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Client{l: l, room: room, token: token}, nil
}

// Room returns the room name the client authenticated for.
func (c *Client) Room() string { return c.room }

// Send sends payload to the host as it is (ReliableOrdered over UDP); the
// host receives [2][sender:4][payload]. The relay drops payloads of one
// byte or less over WebSocket; Send does not refuse them, so tests can
// check that. More than wire.MaxMessageSize bytes gives ErrTooLarge.
func (c *Client) Send(ctx context.Context, payload []byte) error {
	return c.SendWith(ctx, wire.ReliableOrdered, payload)
}

// SendWith is Send with a delivery method: over UDP the packet is
// [method][payload], sent with that method, and the host receives it with
// that method; over WebSocket d is ignored.
func (c *Client) SendWith(ctx context.Context, d wire.Delivery, payload []byte) error {
	var err error
	if c.l.udp() {
		if 1+len(payload) > wire.MaxMessageSize {
			return fmt.Errorf("failed to send to host: %w", ErrTooLarge)
		}
		err = writeFramed(ctx, c.l, d, func(dst []byte) []byte { return wire.AppendClientUDP(dst, d, payload) })
	} else if len(payload) > wire.MaxMessageSize {
		err = ErrTooLarge
	} else {
		err = c.l.write(ctx, d, payload)
	}
	if err != nil {
		return fmt.Errorf("failed to send to host: %w", err)
	}
	return nil
}

// Recv returns the next payload the host sent to this client (unframed).
func (c *Client) Recv(ctx context.Context) ([]byte, error) {
	_, b, err := c.RecvWith(ctx)
	return b, err
}

// RecvWith is Recv that also returns the delivery method (UDP).
func (c *Client) RecvWith(ctx context.Context) (wire.Delivery, []byte, error) {
	d, b, err := c.l.read(ctx)
	if err != nil {
		return d, nil, fmt.Errorf("failed to read from relay: %w", err)
	}
	return d, b, nil
}

// RecvInto reads the next payload into buf without allocating (over
// WebSocket) and returns its length. Make buf ReadLimit bytes long to
// accept every message. With a context that has no Done channel it
// allocates nothing (see Host.NextInto).
func (c *Client) RecvInto(ctx context.Context, buf []byte) (int, error) {
	_, n, err := c.l.readInto(ctx, buf)
	if err != nil {
		return 0, fmt.Errorf("failed to read from relay: %w", err)
	}
	return n, nil
}

// WriteRawWith sends b as one message, unframed, with a delivery method
// (tests of bad UDP input).
func (c *Client) WriteRawWith(ctx context.Context, d wire.Delivery, b []byte) error {
	if len(b) > wire.MaxMessageSize {
		return ErrTooLarge
	}
	return c.l.write(ctx, d, b)
}

// Close leaves the room with a normal closure; the host gets [1][id].
func (c *Client) Close() error { return c.l.close() }

// CloseNow drops the connection without a close handshake.
func (c *Client) CloseNow() error { return c.l.closeNow() }

// Transport is how the client reaches the relay.
func (c *Client) Transport() Transport { return transportOf(c.l) }

// Raw returns an unchecked view of the same connection (WebSocket only;
// nil over UDP).
func (c *Client) Raw() *Raw { return rawOf(c.l) }

// NATToken is the token of the NAT introduction the relay sent before
// authenticating the client ("" if none).
func (c *Client) NATToken() string { return c.token }

// NATIntroduce asks the relay, over the client's own UDP socket as PurrNet
// does, for the introduction to its host that NATToken names. UDP only.
func (c *Client) NATIntroduce(ctx context.Context) (litenet.NatPacket, error) {
	return natIntroduce(ctx, c.l, c.token)
}
