package relay

import (
	"context"
	"net"
	"net/http"
	"net/http/httptrace"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/wsframe"
)

// A link is the edge's client WebSocket to the machine holding a
// forwarded connection's room. coder/websocket dials it through the mesh's
// transport, whose connections are masked wsframe.Writers
// (wsframe.DialContext), so the link's data frames go out one system call
// per batch as an accepted connection's do.
//
// Keeping the socket also bounds a link's close: coder/websocket's CloseNow
// does not close a socket whose close handshake is in progress (it waits
// for its own timers), so runForwarded closes the socket itself once
// linkGrace has passed.

// uplink is the edge's side of a link to a holder machine.
type uplink struct {
	ws *websocket.Conn
	// lc is the socket ws runs on, where the link's data frames are
	// written and which the edge closes itself. nil when the link does not
	// run on a plain socket (a wss:// endpoint: TLS sits in between); such
	// a link writes through ws one message at a time and is closed by
	// coder/websocket.
	lc *wsframe.Writer
}

// dialUplink opens a WebSocket to url through client, whose transport
// dials with wsframe.DialContext, and keeps the socket it runs on.
func dialUplink(ctx context.Context, client *http.Client, url string, h http.Header) (*uplink, error) {
	// GotConn runs on this goroutine, inside websocket.Dial, with the
	// connection the upgrade request was sent on (the last one, if the
	// transport retried).
	var nc net.Conn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { nc = info.Conn },
	})
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:      client,
		HTTPHeader:      h,
		CompressionMode: websocket.CompressionDisabled,
	})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	return &uplink{ws: ws, lc: wsframe.Upgraded(nc)}, nil
}

// drop ends the link at once: it closes the socket itself, which fails a
// blocked write and ends a close handshake in progress, then releases
// coder/websocket's side.
func (u *uplink) drop() {
	if u.lc != nil {
		_ = u.lc.Close()
	}
	_ = u.ws.CloseNow()
}
