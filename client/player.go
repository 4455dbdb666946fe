package client

import (
	"context"
	"fmt"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// Client is an ordinary player of a room. See the package doc for which
// methods may run concurrently.
type Client struct {
	ws   *websocket.Conn // static after DialClient; coder/websocket guards it
	room string          // static
}

// DialClient connects to the relay of capability c (from Join) as a client of
// room, sends the authentication message and waits for the relay's 3. A 4
// gives ErrAuthFailed. Without a deadline on ctx, DefaultDialTimeout bounds
// the whole exchange. A client never learns its own id: the host sees it.
func DialClient(ctx context.Context, c wire.Capability, room string, opts *DialOptions) (*Client, error) {
	ws, err := authRoom(ctx, c, room, opts)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Client{ws: ws, room: room}, nil
}

// Room returns the room name the client authenticated for.
func (c *Client) Room() string { return c.room }

// Send sends payload to the host as it is; the host receives
// [2][sender:4][payload]. The relay drops payloads of one byte or less;
// Send does not refuse them, so tests can check that. More than
// wire.MaxMessageSize bytes gives ErrTooLarge.
func (c *Client) Send(ctx context.Context, payload []byte) error {
	if err := writeChecked(ctx, c.ws, payload); err != nil {
		return fmt.Errorf("failed to send to host: %w", err)
	}
	return nil
}

// Recv returns the next payload the host sent to this client (unframed).
func (c *Client) Recv(ctx context.Context) ([]byte, error) {
	b, err := readMessage(ctx, c.ws)
	if err != nil {
		return nil, fmt.Errorf("failed to read from relay: %w", err)
	}
	return b, nil
}

// RecvInto reads the next payload into buf without allocating and returns
// its length. Make buf ReadLimit bytes long to accept every message. With a
// context that has no Done channel it allocates nothing (see Host.NextInto).
func (c *Client) RecvInto(ctx context.Context, buf []byte) (int, error) {
	n, err := readInto(ctx, c.ws, buf)
	if err != nil {
		return 0, fmt.Errorf("failed to read from relay: %w", err)
	}
	return n, nil
}

// Close leaves the room with a normal closure; the host gets [1][id].
func (c *Client) Close() error { return closeWS(c.ws) }

// CloseNow drops the connection without a close handshake.
func (c *Client) CloseNow() error { return closeNow(c.ws) }

// Raw returns an unchecked view of the same connection.
func (c *Client) Raw() *Raw { return &Raw{ws: c.ws} }
