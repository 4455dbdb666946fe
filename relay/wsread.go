package relay

import (
	"github.com/purrfly/purrfly/relay/internal/buf"

	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// The read side of an accepted WebSocket after the upgrade (issue 16).
// coder/websocket upgrades the connection; from then on the relay reads
// the peer's frames itself, as it already writes its own (frameconn.go).
// At game rates a message costs a WebSocket server little besides the
// system calls, and coder/websocket's reader was a large part of that
// little: a channel-based read lock taken twice a message (select,
// channel receive), its message reader's reset, a deferred check per
// frame header, about 1.2 to 1.9 µs of the relay's 14 µs a message at the
// game rate (BENCHMARKS.md). frameReader parses RFC 6455 client frames
// straight out of the connection's buffers into the pooled message buffer.
//
// What it reads: masked frames (a peer that does not mask is refused, as
// RFC 6455 5.1 says), binary messages in one frame or several
// (continuations), with ping, pong and close frames anywhere between
// them; a ping is answered with a pong through the frame mutex, a pong is
// ignored (the relay never pings), a close is answered with a close of the
// same code when the relay has not sent one, and ends the reading (a close
// whose code RFC 6455 7.4 does not allow on the wire, or whose reason is
// not UTF-8, is a breach, as coder/websocket had it). Each control frame
// the relay writes is bounded by ctlWriteTimeout, and during the
// authentication by its deadline: a peer that pings and never reads is
// dropped, it does not hold a reader (and its slot among the pending
// upgrades) for good. A text
// message ends the connection (reasonUnsupported, 1003), a message over the
// limit too (reasonTooBig, after a 1009 close frame), and so does any
// other breach of the framing (reserved bits, unknown opcodes, a control
// frame fragmented or over 125 bytes, a continuation of nothing, a data
// frame inside a fragmented message: a 1002 close frame, then as if the
// peer had closed).
//
// Who reads: frameReader.mu is held by whoever reads frames, the
// connection's reader while it reads a message (and looks at what is left
// buffered, more), and the writer's close handshake while it waits for
// the peer's close frame (awaitClose): whichever holds it sees the close
// frame, and the other learns of it.

// frameReader reads the frames a peer sends an accepted connection. rc and
// limit are static; the rest is guarded by mu.
type frameReader struct {
	mu    sync.Mutex
	rc    *readConn // the socket, read through rc.br (what the upgrade left buffered comes first)
	limit int       // the longest message

	skip   uint64        // payload bytes of the current frame left unread (a text frame, refused unread)
	closed bool          // the peer's close frame was read, or the stream ended
	ctl    [2 + 125]byte // a control frame: its payload as read, then the answer
	// authBy is the authentication's deadline while it is read (wsAuth),
	// else zero: it bounds the control frames written meanwhile too.
	authBy time.Time
}

// ctlWriteTimeout bounds each control frame the relay writes to a peer
// (pong, close), as coder/websocket's 5 s did.
const ctlWriteTimeout = 5 * time.Second

// ctlDeadline is when a control frame written now must be out. The
// caller holds mu.
func (r *frameReader) ctlDeadline() time.Time {
	d := time.Now().Add(ctlWriteTimeout) // wall clock: a real socket's write deadline
	if !r.authBy.IsZero() && r.authBy.Before(d) {
		return r.authBy
	}
	return d
}

// newFrameReader reads rc's frames, messages of up to limit bytes (at
// most wire.MaxMessageSize, what the pooled buffers hold).
func newFrameReader(rc *readConn, limit int) *frameReader {
	return &frameReader{rc: rc, limit: min(limit, wire.MaxMessageSize)}
}

// Frame opcodes (RFC 6455 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
)

// next reads the next message into a pooled buffer (which the caller then
// owns) with headroom bytes free in front, answering the control frames
// on the way, or returns why the connection ends. The caller holds mu.
func (r *frameReader) next() (*buf.Buf, closeReason) {
	if r.closed || r.skip > 0 {
		return nil, reasonPeerClosed
	}
	br := r.rc.br
	var b *buf.Buf
	pos := buf.Headroom
	for {
		// The whole header first, then its checks, as coder/websocket
		// read it: a stream that ends inside a header ends the same way
		// whatever the header says.
		fh, err := peekHeader(br)
		if err != nil {
			buf.Put(b)
			return nil, r.failed(err)
		}
		if fh.b0&0x70 != 0 || !fh.masked || fh.n>>63 != 0 {
			// Reserved bits, an unmasked frame, or a length whose most
			// significant bit is set.
			buf.Put(b)
			return nil, r.breach()
		}
		_, _ = br.Discard(fh.len)
		fin, op, n, key := fh.b0&0x80 != 0, fh.b0&0x0f, fh.n, fh.key

		if op >= opClose {
			if !fin || n > 125 {
				buf.Put(b)
				return nil, r.breach()
			}
			if reason := r.control(op, int(n), key); reason != reasonNone {
				buf.Put(b)
				return nil, reason
			}
			continue
		}
		switch {
		case op == opText && b == nil:
			r.skip = n
			return nil, reasonUnsupported
		case op == opBinary && b == nil:
		case op == opContinuation && b != nil:
		default:
			// A continuation of nothing, a data frame inside a fragmented
			// message, or an opcode RFC 6455 reserves.
			buf.Put(b)
			return nil, r.breach()
		}
		if room := uint64(r.limit - (pos - buf.Headroom)); n > room {
			// Taken in up to one byte past the limit first, as
			// coder/websocket did: a peer still writing the message
			// sees its close, not a reset.
			buf.Put(b)
			if _, err := br.Discard(int(room + 1)); err != nil {
				return nil, r.failed(err)
			}
			return nil, r.tooBig()
		}
		end := pos + int(n)
		switch {
		case b == nil:
			b = buf.Get(end)
		case end > len(b.B):
			nb := buf.Get(end)
			copy(nb.B, b.B[:pos])
			buf.Put(b)
			b = nb
		}
		if _, err := io.ReadFull(br, b.B[pos:end]); err != nil {
			buf.Put(b)
			return nil, r.failed(err)
		}
		maskBytes(b.B[pos:end], b.B[pos:end], key)
		pos = end
		if fin {
			b.Off, b.End = buf.Headroom, pos
			return b, reasonNone
		}
	}
}

// frameHeader is a frame's header as peekHeader read it.
type frameHeader struct {
	b0     byte    // FIN, RSV1-3 and the opcode
	masked bool    // the MASK bit
	n      uint64  // the payload length, decoded (not checked)
	key    [4]byte // the masking key when masked
	len    int     // the header's length on the wire, 2 to 14 bytes
}

// peekHeader reads the next frame's whole header from br without
// consuming it (the caller discards fh.len bytes once it accepts it).
func peekHeader(br *bufio.Reader) (fh frameHeader, err error) {
	h, err := br.Peek(2)
	if err != nil {
		return fh, err
	}
	fh = frameHeader{b0: h[0], masked: h[1]&0x80 != 0, n: uint64(h[1] & 0x7f), len: 2}
	switch fh.n {
	case 126:
		fh.len += 2
	case 127:
		fh.len += 8
	}
	if fh.masked {
		fh.len += 4
	}
	if h, err = br.Peek(fh.len); err != nil {
		return fh, err
	}
	switch fh.n {
	case 126:
		fh.n = uint64(binary.BigEndian.Uint16(h[2:]))
	case 127:
		fh.n = binary.BigEndian.Uint64(h[2:])
	}
	if fh.masked {
		copy(fh.key[:], h[fh.len-4:fh.len])
	}
	return fh, nil
}

// control reads a control frame's n-byte payload and answers it.
func (r *frameReader) control(op byte, n int, key [4]byte) closeReason {
	p := r.ctl[2 : 2+n]
	if _, err := io.ReadFull(r.rc.br, p); err != nil {
		return r.failed(err)
	}
	maskBytes(p, p, key)
	fc := r.rc.frameConn
	switch op {
	case opPing:
		// (None after the relay's close frame.)
		r.ctl[0], r.ctl[1] = 0x80|opPong, byte(n)
		if err := fc.writeUnlessClosing(r.ctl[:2+n], r.ctlDeadline()); err != nil {
			return r.writeFailed()
		}
	case opClose:
		r.closed = true
		if n == 1 || (n >= 2 && !closeCodeAllowed(binary.BigEndian.Uint16(p))) || !utf8.Valid(p[min(n, 2):]) {
			return r.breach()
		}
		// The handshake's answer: the same code (none for none), unless
		// this close answers ours.
		r.ctl[0], r.ctl[1] = 0x80|opClose, byte(min(n, 2))
		_ = fc.writeUnlessClosing(r.ctl[:2+min(n, 2)], r.ctlDeadline())
		return reasonPeerClosed
	case opPong:
	default:
		return r.breach()
	}
	return reasonNone
}

// more reports whether bytes already read from the socket are waiting to
// be read: the start of another message, as a rule (conn.direct). The
// caller holds mu.
func (r *frameReader) more() bool {
	return r.rc.br.Buffered() > 0 || r.rc.rbuf != nil || len(r.rc.pending) > 0
}

// awaitClose reads, and drops, whatever the peer still sends until its
// close frame or the end of the stream: the second half of a close
// handshake the relay began. It is bounded by the close grace, which
// drops the socket. The caller holds mu.
func (r *frameReader) awaitClose() {
	br := r.rc.br
	for !r.closed {
		if r.skip > 0 {
			k := int(min(r.skip, 4096))
			if _, err := br.Discard(k); err != nil {
				r.closed = true
				return
			}
			r.skip -= uint64(k)
			continue
		}
		fh, err := peekHeader(br)
		if err != nil {
			r.closed = true
			return
		}
		_, _ = br.Discard(fh.len)
		r.skip = fh.n
		if fh.b0&0x0f == opClose {
			r.closed = true
		}
	}
}

// closeCodeAllowed reports whether a peer may send code in a close frame
// (RFC 6455 7.4.1 and 7.4.2): 1000 to 1014 less the reserved 1004 and
// the codes that stand for no frame (1005, 1006), and the 3000 to 4999
// of libraries and applications.
func closeCodeAllowed(code uint16) bool {
	switch {
	case code == 1004 || code == 1005 || code == 1006:
		return false
	case code >= 1000 && code <= 1014, code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// writeFailed is why a control frame that could not be written in time
// ends the connection: the peer is not reading (it may have been sent
// part of the frame, so the socket is dropped).
func (r *frameReader) writeFailed() closeReason {
	r.closed = true
	if !r.authBy.IsZero() {
		return reasonAuthTimeout
	}
	return reasonWriteError
}

// failed is why a read that failed ends the connection: the
// authentication's deadline passed, or the peer is gone.
func (r *frameReader) failed(err error) closeReason {
	r.closed = true
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return reasonAuthTimeout
	}
	return reasonPeerClosed
}

// breach ends a connection that broke RFC 6455's framing: a 1002 close
// frame, then as if the peer had gone.
func (r *frameReader) breach() closeReason {
	r.closed = true
	r.closeWith(websocket.StatusProtocolError, "")
	return reasonPeerClosed
}

// tooBig ends a connection whose message passed the limit with a 1009
// close frame (what coder/websocket sent), then drops it.
func (r *frameReader) tooBig() closeReason {
	r.closed = true
	code, text := reasonTooBig.wsCode()
	r.closeWith(code, text)
	return reasonTooBig
}

func (r *frameReader) closeWith(code websocket.StatusCode, text string) {
	_ = r.rc.frameConn.writeClose(code, text, r.ctlDeadline())
}

// writeClose writes an unmasked close frame with code and text (at most
// 123 bytes) through writeUnlessClosing, bounded by deadline.
func (f *frameConn) writeClose(code websocket.StatusCode, text string, deadline time.Time) error {
	var b [4 + 123]byte
	out := append(b[:0], 0x80|opClose, byte(2+len(text)))
	out = binary.BigEndian.AppendUint16(out, uint16(code))
	return f.writeUnlessClosing(append(out, text...), deadline)
}
