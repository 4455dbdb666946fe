package wsframe

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// What a Reader reads: masked frames (a peer that does not mask is
// refused, as RFC 6455 5.1 says), binary messages in one frame or several
// (continuations), with ping, pong and close frames anywhere between them;
// a ping is answered with a pong through the Writer, a pong is ignored
// (the relay never pings), a close is answered with a close of the same
// code when the relay has not sent one, and ends the reading (a close
// whose code RFC 6455 7.4 does not allow on the wire, or whose reason is
// not UTF-8, is a breach, as coder/websocket had it). Each control frame
// the relay writes is bounded by ctlWriteTimeout, and while a deadline
// bounds the read (NextBefore) by that deadline: a peer that pings and
// never reads is dropped, it does not hold a reader for good. A text
// message ends the connection (EndUnsupported), a message over the limit
// too (EndTooBig, after a 1009 close frame), and so does any other breach
// of the framing (reserved bits, unknown opcodes, a control frame
// fragmented or over 125 bytes, a continuation of nothing, a data frame
// inside a fragmented message: a 1002 close frame, then as if the peer had
// closed).
//
// Stalls. Waiting for a message is unbounded (an idle player sends
// nothing), but once a frame's first byte is in, the rest of the message
// (its frames, and control frames between them) must be in within the
// Reader's stall bound, or the read ends with EndStalled: a peer that
// announces a long frame and sends part of it holds a goroutine and a
// message buffer only that long. The bound costs nothing on a frame the
// socket already delivered whole: the deadline is armed only when a read
// would wait (need), and disarmed before the next idle wait. A data frame
// announcing more than the limit is refused at its header: the 1009 close
// frame goes out at once, before anything of its payload is read (then up
// to one byte past the limit is drained, for at most tooBigLinger or the
// stall bound, so that a peer still writing sees the close rather than a
// reset).

// End is why a Reader stopped: EndNone, it did not.
type End uint8

const (
	EndNone        End = iota
	EndClosed          // the peer closed, the stream ended, or the peer broke the framing
	EndUnsupported     // a text message: the relay carries binary messages only
	EndTooBig          // a message over the limit (a 1009 close frame was sent)
	EndTimeout         // NextBefore's deadline passed
	EndWriteFailed     // a control frame could not be written in time: the peer does not read
	EndStalled         // a message begun was not whole within the stall bound
)

// tooBigLinger bounds the drain after a refused frame's 1009 (see above).
const tooBigLinger = time.Second

// ctlWriteTimeout bounds each control frame the relay writes to a peer
// (pong, close), as coder/websocket's 5 s did.
const ctlWriteTimeout = 5 * time.Second

// Reader reads the frames a peer sends an accepted connection. rc and
// limit are static; the rest is guarded by mu, which whoever reads frames
// holds (the package doc).
type Reader struct {
	mu    lockrank.Mutex
	rc    *readConn     // the socket, read through rc.br (what the upgrade left buffered comes first)
	limit int           // the longest message
	stall time.Duration // a message begun must be whole within it (0: no bound)

	skip   uint64        // payload bytes of the current frame left unread (a text frame, refused unread)
	closed bool          // the peer's close frame was read, or the stream ended
	ctl    [2 + 125]byte // a control frame: its payload as read, then the answer
	// authBy is NextBefore's deadline while it reads, else zero: it
	// bounds the control frames written meanwhile too.
	authBy time.Time
	// stallBy is the socket's deadline for the message being read, armed
	// only when a read had to wait for it (need); zero: not armed.
	stallBy time.Time
}

// newReader reads rc's frames, messages of up to limit bytes (at most
// wire.MaxMessageSize, what the pooled buffers hold).
func newReader(rc *readConn, limit int) *Reader {
	return &Reader{rc: rc, limit: min(limit, wire.MaxMessageSize), mu: lockrank.Mutex{Class: lockrank.FrameReader}}
}

// Next reads the next message into a pooled buffer (which the caller then
// owns) with buf.Headroom bytes free in front, answering the control
// frames on the way, or returns why the connection ends. more reports
// whether bytes already read from the socket wait behind it: the start of
// another message, as a rule.
func (r *Reader) Next() (b *buf.Buf, end End, more bool) {
	r.mu.Lock()
	b, end = r.next()
	more = r.more()
	r.mu.Unlock()
	return b, end, more
}

// NextBefore is Next bounded by deadline, on the socket (a wall-clock
// deadline): past it the read ends with EndTimeout, and so does a control
// frame that cannot be written by then.
func (r *Reader) NextBefore(deadline time.Time) (*buf.Buf, End) {
	nc := r.rc.Writer.Conn
	r.mu.Lock()
	r.authBy = deadline
	_ = nc.SetReadDeadline(deadline)
	b, end := r.next()
	r.authBy, r.stallBy = time.Time{}, time.Time{}
	r.mu.Unlock()
	_ = nc.SetReadDeadline(time.Time{})
	return b, end
}

// ctlDeadline is when a control frame written now must be out. The
// caller holds mu.
func (r *Reader) ctlDeadline() time.Time {
	d := time.Now().Add(ctlWriteTimeout) // wall clock: a real socket's write deadline
	if !r.authBy.IsZero() && r.authBy.Before(d) {
		return r.authBy
	}
	return d
}

// next is Next with mu held.
func (r *Reader) next() (*buf.Buf, End) {
	if r.closed || r.skip > 0 {
		return nil, EndClosed
	}
	br := r.rc.br
	var b *buf.Buf
	pos := buf.Headroom
	for {
		if b == nil {
			// Between messages: the wait for the next frame's first
			// byte is idle, unbounded (but by NextBefore's deadline).
			r.unstall()
			if _, err := br.Peek(1); err != nil {
				return nil, r.failed(err)
			}
		}
		// The whole header first, then its checks, as coder/websocket
		// read it: a stream that ends inside a header ends the same way
		// whatever the header says.
		r.need(2)
		h, err := br.Peek(2)
		if err != nil {
			buf.Put(b)
			return nil, r.failed(err)
		}
		r.need(uint64(headerLen(h[1])))
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
			r.need(n)
			if end := r.control(op, int(n), key); end != EndNone {
				buf.Put(b)
				return nil, end
			}
			continue
		}
		switch {
		case op == opText && b == nil:
			r.skip = n
			return nil, EndUnsupported
		case op == opBinary && b == nil:
		case op == opContinuation && b != nil:
		default:
			// A continuation of nothing, a data frame inside a fragmented
			// message, or an opcode RFC 6455 reserves.
			buf.Put(b)
			return nil, r.breach()
		}
		var end End
		if b, pos, end = r.payload(b, pos, n, key); end != EndNone {
			return nil, end
		}
		if fin {
			b.Off, b.End = buf.Headroom, pos
			return b, EndNone
		}
	}
}

// payload reads a data frame's n-byte payload, unmasked, into b (taken,
// or moved to a larger buffer, as needed) at pos, and returns b and the
// message's end so far. Past the limit it releases b and ends.
func (r *Reader) payload(b *buf.Buf, pos int, n uint64, key [4]byte) (*buf.Buf, int, End) {
	br := r.rc.br
	if room := uint64(r.limit - (pos - buf.Headroom)); n > room {
		// Refused at the header: the close first, then up to one byte
		// past the limit taken in, briefly, as coder/websocket took it
		// in: a peer still writing the message sees the close, not a
		// reset.
		buf.Put(b)
		end := r.tooBig()
		wait := tooBigLinger
		if r.stall > 0 {
			wait = min(wait, r.stall)
		}
		linger := time.Now().Add(wait) // wall clock: a real socket's deadline
		if !r.authBy.IsZero() && r.authBy.Before(linger) {
			linger = r.authBy
		}
		_ = r.rc.Writer.Conn.SetReadDeadline(linger)
		_, _ = br.Discard(int(room + 1))
		return nil, 0, end
	}
	r.need(n)
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
		return nil, 0, r.failed(err)
	}
	maskBytes(b.B[pos:end], b.B[pos:end], key)
	return b, end, EndNone
}

// need arms the stall bound unless n more bytes are already read from
// the socket (then the read ahead cannot wait) or it is armed already.
// The caller holds mu.
func (r *Reader) need(n uint64) {
	if r.stall <= 0 || !r.stallBy.IsZero() {
		return
	}
	if uint64(r.rc.br.Buffered()+len(r.rc.pending)+r.rc.rend-r.rc.rpos) >= n {
		return
	}
	r.stallBy = time.Now().Add(r.stall) // wall clock: a real socket's deadline
	if !r.authBy.IsZero() && r.authBy.Before(r.stallBy) {
		r.stallBy = r.authBy
	}
	_ = r.rc.Writer.Conn.SetReadDeadline(r.stallBy)
}

// unstall disarms the stall bound, back to NextBefore's deadline or
// none. The caller holds mu.
func (r *Reader) unstall() {
	if r.stallBy.IsZero() {
		return
	}
	r.stallBy = time.Time{}
	_ = r.rc.Writer.Conn.SetReadDeadline(r.authBy)
}

// headerLen is the length of a frame header whose second byte is b1.
func headerLen(b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if b1&0x80 != 0 {
		n += 4
	}
	return n
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
func (r *Reader) control(op byte, n int, key [4]byte) End {
	p := r.ctl[2 : 2+n]
	if _, err := io.ReadFull(r.rc.br, p); err != nil {
		return r.failed(err)
	}
	maskBytes(p, p, key)
	w := r.rc.Writer
	switch op {
	case opPing:
		// (None after the relay's close frame.)
		r.ctl[0], r.ctl[1] = 0x80|opPong, byte(n)
		if err := w.WriteControl(r.ctl[:2+n], r.ctlDeadline()); err != nil {
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
		_ = w.WriteControl(r.ctl[:2+min(n, 2)], r.ctlDeadline())
		return EndClosed
	case opPong:
	default:
		return r.breach()
	}
	return EndNone
}

// more reports whether bytes already read from the socket are waiting to
// be read. The caller holds mu.
func (r *Reader) more() bool {
	return r.rc.br.Buffered() > 0 || r.rc.rbuf != nil || len(r.rc.pending) > 0
}

// AwaitClose reads, and drops, whatever the peer still sends until its
// close frame or the end of the stream: the second half of a close
// handshake the relay began. The caller bounds it (closing the socket
// ends it).
func (r *Reader) AwaitClose() {
	r.mu.Lock()
	defer r.mu.Unlock()
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

// writeFailed is why a control frame that could not be written in time
// ends the connection: the peer is not reading (it may have been sent
// part of the frame, so the socket is dropped).
func (r *Reader) writeFailed() End {
	r.closed = true
	if !r.authBy.IsZero() {
		return EndTimeout
	}
	return EndWriteFailed
}

// failed is why a read that failed ends the connection: the deadline
// passed, or the peer is gone.
func (r *Reader) failed(err error) End {
	r.closed = true
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if !r.stallBy.IsZero() && (r.authBy.IsZero() || r.stallBy.Before(r.authBy)) {
			return EndStalled
		}
		return EndTimeout
	}
	return EndClosed
}

// breach ends a connection that broke RFC 6455's framing: a 1002 close
// frame, then as if the peer had gone.
func (r *Reader) breach() End {
	r.closed = true
	_ = r.rc.Writer.WriteClose(CloseProtocolError, "", r.ctlDeadline())
	return EndClosed
}

// tooBig ends a connection whose message passed the limit with a 1009
// close frame (what coder/websocket sent), then drops it.
func (r *Reader) tooBig() End {
	r.closed = true
	_ = r.rc.Writer.WriteClose(CloseTooBig, TooBigText, r.ctlDeadline())
	return EndTooBig
}
