package client

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// RawReadLimit bounds what a Raw connection from DialRaw reads.
const RawReadLimit = 4 * wire.MaxMessageSize

// Raw is a WebSocket to a relay with no authentication, framing or size
// checks on writes: the escape hatch for tests of bad input (text frames,
// oversized messages, arbitrary authentication bytes).
type Raw struct {
	ws *websocket.Conn // static; coder/websocket guards it
}

// DialRaw opens a WebSocket to url and sends nothing. Only opts.HTTPHeader
// and opts.HTTPClient are used. Without a deadline on ctx,
// DefaultDialTimeout bounds the dial.
func DialRaw(ctx context.Context, url string, opts *DialOptions) (*Raw, error) {
	if opts == nil {
		opts = &DialOptions{}
	}
	ctx, cancel := dialContext(ctx)
	defer cancel()
	ws, err := dialWS(ctx, url, opts, RawReadLimit)
	if err != nil {
		return nil, err
	}
	return &Raw{ws: ws}, nil
}

// WriteBinary sends b as one binary message, whatever its size.
func (r *Raw) WriteBinary(ctx context.Context, b []byte) error {
	if err := r.ws.Write(ctx, websocket.MessageBinary, b); err != nil {
		return fmt.Errorf("failed to write binary message: %w", err)
	}
	return nil
}

// WriteText sends b as one text message (PurrNet never does; the relay must
// end the connection).
func (r *Raw) WriteText(ctx context.Context, b []byte) error {
	if err := r.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("failed to write text message: %w", err)
	}
	return nil
}

// Read returns the next message. A text message is returned with
// ErrTextFrame.
func (r *Raw) Read(ctx context.Context) ([]byte, error) {
	typ, b, err := r.ws.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read: %w", err)
	}
	if typ != websocket.MessageBinary {
		return b, ErrTextFrame
	}
	return b, nil
}

// Conn returns the underlying coder/websocket connection.
func (r *Raw) Conn() *websocket.Conn { return r.ws }

// Close closes with the given status code and reason.
func (r *Raw) Close(code int, reason string) error {
	err := r.ws.Close(websocket.StatusCode(code), reason)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("failed to close: %w", err)
	}
	return nil
}

// CloseNow drops the connection without a close handshake.
func (r *Raw) CloseNow() error { return closeNow(r.ws) }

// closeWS closes with a normal closure. A connection the relay already
// closed is not an error.
func closeWS(ws *websocket.Conn) error {
	err := ws.Close(websocket.StatusNormalClosure, "")
	if err == nil || errors.Is(err, net.ErrClosed) || CloseStatus(err) != -1 {
		return nil
	}
	return fmt.Errorf("failed to close: %w", err)
}

func closeNow(ws *websocket.Conn) error {
	err := ws.CloseNow()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("failed to close: %w", err)
	}
	return nil
}
