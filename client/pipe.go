package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// Pipe is a pipe-mode peer: no room, no host, connection-id forwarding. See
// the package doc for which methods may run concurrently.
type Pipe struct {
	ws *websocket.Conn // static after DialPipe; coder/websocket guards it
	id wire.ConnID     // static: the relay's [5][id:4] reply
}

// DialPipe connects to the relay WebSocket at url (ws://host:port) and
// authenticates with {"pipe":true}; the relay answers [5][id:4]. A 4 gives
// ErrAuthFailed. opts.URL and opts.NoSessionHint are ignored.
func DialPipe(ctx context.Context, url string, opts *DialOptions) (*Pipe, error) {
	ws, reply, err := authenticate(ctx, url, []byte(PipeAuthJSON), opts)
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if len(reply) != 5 || reply[0] != wire.PipeAuthenticated {
		ws.CloseNow()
		return nil, fmt.Errorf("pipe: failed to authenticate: %w (%d bytes, first %#x)", ErrUnexpectedReply, len(reply), firstByte(reply))
	}
	return &Pipe{ws: ws, id: le32(reply[1:])}, nil
}

// ID returns the connection id the relay gave this pipe.
func (p *Pipe) ID() wire.ConnID { return p.id }

var pipePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Send sends data to pipe peer target ([target:4][data]).
func (p *Pipe) Send(ctx context.Context, target wire.ConnID, data []byte) error {
	if 4+len(data) > wire.MaxMessageSize {
		return fmt.Errorf("failed to send to pipe %d: %w", target, ErrTooLarge)
	}
	bp := pipePool.Get().(*[]byte)
	b := wire.AppendPipe((*bp)[:0], target, data)
	err := p.ws.Write(ctx, websocket.MessageBinary, b)
	*bp = b[:0]
	pipePool.Put(bp)
	if err != nil {
		return fmt.Errorf("failed to send to pipe %d: %w", target, err)
	}
	return nil
}

// Recv returns the next packet: the sender's id and its data.
func (p *Pipe) Recv(ctx context.Context) (wire.ConnID, []byte, error) {
	b, err := readMessage(ctx, p.ws)
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
func (p *Pipe) Close() error { return closeWS(p.ws) }

// CloseNow drops the connection without a close handshake.
func (p *Pipe) CloseNow() error { return closeNow(p.ws) }

// Raw returns an unchecked view of the same connection.
func (p *Pipe) Raw() *Raw { return &Raw{ws: p.ws} }
