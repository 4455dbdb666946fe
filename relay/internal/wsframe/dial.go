package wsframe

import (
	"context"
	"net"
)

// A link (the edge's client WebSocket to the machine holding a forwarded
// connection's room) is dialed by coder/websocket through net/http's
// transport, which writes straight to the dialed connection: DialContext
// makes that connection a masked Writer (client frames are masked, RFC
// 6455 5.3: each frame gets a fresh 4-byte key and its payload is XORed
// with it, 8 bytes at a time, while being copied into the batch buffer),
// and Upgraded finds it again once the upgrade is over. After the
// handshake coder/websocket only writes control frames there (pong,
// close; the relay never pings a link), each in one Write.

// DialContext is a transport's DialContext that dials TCP with d and makes
// the connection a masked Writer.
func DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newWriter(nc, true), nil
	}
}

// Upgraded returns the Writer a link's upgrade went over (nc, the
// connection net/http used for it), marked upgraded: from now on every
// Write is one of coder/websocket's frames. It returns nil when nc is no
// Writer (a wss:// link: TLS sits in between).
func Upgraded(nc net.Conn) *Writer {
	w, ok := nc.(*Writer)
	if !ok {
		return nil
	}
	w.own.Lock()
	w.upgraded = true
	w.own.Unlock()
	return w
}
