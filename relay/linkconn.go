package relay

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Frame-level writes on a link (the edge's client WebSocket to the
// machine holding a forwarded connection's room), the client-side
// counterpart of frameconn.go. coder/websocket flushes every message, so
// the link's writer made one write system call per forwarded frame. The
// link keeps coder/websocket for the upgrade, reading, answering pings and
// the close handshake; its data frames are encoded here into one pooled
// buffer per batch and written with one system call.
//
// Client frames must be masked (RFC 6455 section 5.3): each frame gets a
// fresh 4-byte key and its payload is XORed with it, 8 bytes at a time,
// while being copied into the batch buffer.
//
// Both writers meet in linkConn, the TCP connection the mesh's
// http.Transport dials. coder/websocket's client writes through net/http's
// upgraded response body straight to that connection, and on a link it
// only ever writes control frames (pong, close; the relay never pings a
// link): at most 131 bytes, fully buffered in its 4 KiB bufio.Writer and
// flushed at once, so each of its Write calls here is one whole frame
// (TestLinkConnBatch pins this) and linkConn's mutex keeps them whole
// between our batches.
//
// Keeping the socket also bounds a link's close: coder/websocket's CloseNow
// does not close a socket whose close handshake is in progress (it waits
// for its own timers), so runForwarded closes linkConn itself once
// linkGrace has passed.

// linkConn is the TCP connection of a link. Static after the dial except
// upgraded and closeSent, guarded by mu with the socket's write side.
type linkConn struct {
	net.Conn
	mu sync.Mutex
	// upgraded is set (under mu) once the WebSocket handshake is over:
	// from then on every Write is one of coder/websocket's frames.
	upgraded  bool
	closeSent bool // guarded by mu: a close frame went out, no data may follow
}

// Write is net/http's path to the socket (the upgrade request) and then
// coder/websocket's (its control frames).
func (l *linkConn) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.upgraded && len(p) > 0 && p[0]&0x0f == 0x8 {
		l.closeSent = true
	}
	return l.Conn.Write(p)
}

// writeBatch writes every frame of batch as a masked binary message, in
// order, with as few system calls as the pooled buffer allows (one for a
// batch of game packets), and releases the frames. deadline, when not
// zero, bounds the writes.
func (l *linkConn) writeBatch(batch []*buf, deadline time.Time) error {
	bp := batchBufs.Get().(*[]byte)
	out := (*bp)[:0]
	l.mu.Lock()
	err := l.encodeAndWrite(batch, out, deadline)
	l.mu.Unlock()
	*bp = out[:0]
	batchBufs.Put(bp)
	for i, b := range batch {
		putBuf(b)
		batch[i] = nil
	}
	return err
}

// encodeAndWrite does writeBatch's work with l.mu held.
func (l *linkConn) encodeAndWrite(batch []*buf, out []byte, deadline time.Time) error {
	if l.closeSent {
		return net.ErrClosed
	}
	if !deadline.IsZero() {
		if err := l.Conn.SetWriteDeadline(deadline); err != nil {
			return fmt.Errorf("failed to set the write deadline: %w", err)
		}
		defer func() { _ = l.Conn.SetWriteDeadline(time.Time{}) }()
	}
	for _, b := range batch {
		p := b.frame()
		if len(out)+maxMaskedHeader+len(p) > cap(out) && len(out) > 0 {
			if _, err := l.Conn.Write(out); err != nil {
				return fmt.Errorf("failed to write frames: %w", err)
			}
			out = out[:0]
		}
		var key [4]byte
		out, key = appendMaskedHeader(out, len(p))
		if len(out)+len(p) <= cap(out) {
			n := len(out)
			out = out[:n+len(p)]
			maskBytes(out[n:], p, key)
			continue
		}
		// Larger than the whole buffer: header, then the payload masked
		// in place (the frame is ours until it is released).
		if _, err := l.Conn.Write(out); err != nil {
			return fmt.Errorf("failed to write a frame header: %w", err)
		}
		out = out[:0]
		maskBytes(p, p, key)
		if _, err := l.Conn.Write(p); err != nil {
			return fmt.Errorf("failed to write a frame: %w", err)
		}
	}
	if len(out) > 0 {
		if _, err := l.Conn.Write(out); err != nil {
			return fmt.Errorf("failed to write frames: %w", err)
		}
	}
	return nil
}

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
// and wraps the connection in a linkConn.
func linkDialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &linkConn{Conn: nc}, nil
	}
}

// uplink is the edge's side of a link to a holder machine.
type uplink struct {
	ws *websocket.Conn
	// lc is the socket ws runs on, where the link's data frames are
	// written and which the edge closes itself. nil when the link does not
	// run on a plain linkConn (a wss:// endpoint: TLS sits in between);
	// such a link writes through ws one message at a time and is closed by
	// coder/websocket.
	lc *linkConn
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
	if lc, ok := nc.(*linkConn); ok {
		lc.mu.Lock()
		lc.upgraded = true
		lc.mu.Unlock()
		up.lc = lc
	}
	return up, nil
}

// batches is the link writer's frame-level path, nil without lc (an
// untyped nil: wsWriter then writes through ws).
func (u *uplink) batches() batchWriter {
	if u.lc == nil {
		return nil
	}
	return u.lc
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
