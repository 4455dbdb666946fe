package relay

import (
	"github.com/purrfly/purrfly/relay/internal/buf"

	"context"
	"errors"
	"io"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// How accepted connections were read before the relay read their frames
// itself (wsread.go): through coder/websocket. FuzzFrameReader holds the
// relay's reader to it.

// wsRead reads one binary message into a pooled buffer (which the caller
// owns), or returns why the connection ends.
func wsRead(ctx context.Context, ws *websocket.Conn) (*buf.Buf, closeReason) {
	typ, rd, err := ws.Reader(ctx)
	if err != nil {
		return nil, readFailure(err, ctx)
	}
	if typ != websocket.MessageBinary {
		return nil, reasonUnsupported
	}
	b, err := readMessage(rd)
	if err != nil {
		return nil, readFailure(err, ctx)
	}
	return b, reasonNone
}

func readFailure(err error, authCtx context.Context) closeReason {
	switch {
	case errors.Is(err, websocket.ErrMessageTooBig), errors.Is(err, buf.ErrTooBig):
		return reasonTooBig
	case errors.Is(authCtx.Err(), context.DeadlineExceeded):
		return reasonAuthTimeout
	}
	return reasonPeerClosed
}

// readMessage reads one message from r into a pooled buffer, leaving
// headroom bytes free in front. It starts with the smallest class and moves
// up only when the message does not fit, so small game packets never touch
// a 64 KiB buffer. The caller owns the result.
func readMessage(r io.Reader) (*buf.Buf, error) {
	return buf.ReadInto(r, buf.Headroom, wire.MaxMessageSize)
}
