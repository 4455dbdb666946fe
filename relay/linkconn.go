package relay

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"

	"github.com/coder/websocket"
)

// Frame-level writes on a link (the edge's client WebSocket to the
// machine holding a forwarded connection's room), the client-side
// counterpart of an accepted connection's (frameconn.go): the link's
// socket is a frameConn with masked set, so its data frames go out in one
// system call per batch too.
//
// Client frames must be masked (RFC 6455 section 5.3): each frame gets a
// fresh 4-byte key and its payload is XORed with it, 8 bytes at a time,
// while being copied into the batch buffer.
//
// coder/websocket's client writes through net/http's upgraded response
// body straight to the dialed connection, so the mesh transport's dialer
// wraps each TCP connection in a frameConn (linkDialContext) and
// dialUplink finds the one the upgrade went over. After the handshake
// coder/websocket only writes control frames there (pong, close; the
// relay never pings a link), each in one Write (TestLinkConnBatch pins
// this).
//
// Keeping the socket also bounds a link's close: coder/websocket's CloseNow
// does not close a socket whose close handshake is in progress (it waits
// for its own timers), so runForwarded closes the socket itself once
// linkGrace has passed.

// maxMaskedHeader is the longest masked frame header.
const maxMaskedHeader = maxFrameHeader + 4

// appendMaskedHeader appends the header of one masked, final, binary frame
// carrying n bytes, with a fresh masking key, and returns the key.
//
// The key comes from math/rand/v2's global source, the runtime's
// per-thread ChaCha8 generator seeded from the operating system: no lock,
// no allocation, no per-link state, a few nanoseconds a key (coder/websocket
// reads crypto/rand for every frame). RFC 6455 section 10.3 wants keys a
// script cannot predict, so that a hostile page cannot choose the bytes an
// intermediary sees; a link runs between machines of one app over the
// private network, with no script and no intermediary, and these keys are
// unpredictable from outside the process anyway.
func appendMaskedHeader(out []byte, n int) ([]byte, [4]byte) {
	h := len(out)
	out = appendFrameHeader(out, n)
	out[h+1] |= 0x80 // MASK
	var key [4]byte
	binary.LittleEndian.PutUint32(key[:], rand.Uint32())
	return append(out, key[:]...), key
}

// maskBytes writes src XORed with key (byte i with key[i%4]) to dst, which
// must be at least as long as src; dst and src may be the same slice. It
// works 8 bytes at a time.
func maskBytes(dst, src []byte, key [4]byte) {
	k := uint64(binary.LittleEndian.Uint32(key[:]))
	k |= k << 32
	dst = dst[:len(src)]
	i := 0
	for ; len(src)-i >= 8; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k)
	}
	for ; i < len(src); i++ {
		dst[i] = src[i] ^ key[i&3]
	}
}

// linkDialContext is the mesh transport's DialContext: it dials TCP with d
// and wraps the connection in a masked frameConn.
func linkDialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return (&frameConn{Conn: nc, masked: true}).enableDirect(), nil
	}
}

// uplink is the edge's side of a link to a holder machine.
type uplink struct {
	ws *websocket.Conn
	// lc is the socket ws runs on, where the link's data frames are
	// written and which the edge closes itself. nil when the link does not
	// run on a plain frameConn (a wss:// endpoint: TLS sits in between);
	// such a link writes through ws one message at a time and is closed by
	// coder/websocket.
	lc *frameConn
}

// dialUplink opens a WebSocket to url through client, whose transport
// dials with linkDialContext, and keeps the socket it runs on.
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
	up := &uplink{ws: ws}
	if lc, ok := nc.(*frameConn); ok {
		lc.mu.Lock()
		lc.upgraded = true
		lc.mu.Unlock()
		up.lc = lc
	}
	return up, nil
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
