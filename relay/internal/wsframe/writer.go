package wsframe

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/buf"
)

// batchBufSize is the pooled buffer a batch is encoded into; a frame that
// does not fit an empty one is written as its header and payload.
const batchBufSize = 32 << 10

// MaxDirect is the longest frame a sender writes itself (WriteDirect): one
// that fits a pooled batch buffer with any header and prefix. Longer ones
// are queued for the writer, which writes them header and payload apart.
const MaxDirect = batchBufSize - maxMaskedHeader - 1

var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, batchBufSize); return &b }}

// putBatchBuf gives a batch buffer back, empty.
func putBatchBuf(bp *[]byte) {
	*bp = (*bp)[:0]
	batchBufs.Put(bp)
}

// Writer is the TCP connection of one WebSocket whose data frames the
// relay writes itself, and the net.Conn coder/websocket writes its own
// frames through. masked is static; raw and writeFD are static once set
// (before the connection is used); prefixMethod is static once the
// connection's writer starts; everything else is guarded by own.
type Writer struct {
	net.Conn
	masked bool // client frames (a link to a holder machine), masked per RFC 6455 5.3
	// prefixMethod puts each frame's delivery method in front of it: the
	// holder's side of a link carrying a UDP peer (wire.HeaderLinkFraming).
	prefixMethod bool

	raw     syscall.RawConn // the socket's descriptor, for direct writes; nil: none
	writeFD func(fd uintptr) bool

	// own is the socket's write side: whoever writes holds it for whole
	// frames (see the package doc; a direct write that leaves part of a
	// frame hands it on with the Rest).
	own lockrank.Mutex
	// upgraded is set once the WebSocket handshake is over (at the hijack
	// for an accepted connection, after the dial for a link): from then
	// on every Write is one of coder/websocket's frames.
	upgraded  bool
	closeSent bool // a close frame went out, no data may follow
	// broken: half a frame is on the wire and never will be finished (a
	// failed write of a frame's rest, or one dropped): nothing else may be
	// written.
	broken bool
	// wout, wn and werr are a direct write's bytes and outcome, for
	// writeFD; rest is what it left of its frame (in restBuf, pooled),
	// which travels with the ownership (Rest).
	wout    []byte
	wn      int
	werr    error
	rest    []byte
	restBuf *[]byte
}

// NewWriter is the Writer of nc, a WebSocket whose upgrade is over (the
// Hijacker's, and tests').
func NewWriter(nc net.Conn, masked bool) *Writer {
	w := newWriter(nc, masked)
	w.upgraded = true
	return w
}

// DirectWrites reports whether this platform's sockets take direct
// writes (a plain socket's Writer is then Direct).
func DirectWrites() bool { return rawWriteSupported }

// newWriter is the Writer of nc, with direct writes when nc is a plain
// socket of this platform.
func newWriter(nc net.Conn, masked bool) *Writer {
	w := &Writer{Conn: nc, masked: masked, own: lockrank.Mutex{Class: lockrank.FrameSocket}}
	if sc, ok := nc.(syscall.Conn); ok && rawWriteSupported {
		if raw, err := sc.SyscallConn(); err == nil {
			w.raw = raw
			w.writeFD = w.rawWriteFD // bound once: no allocation per write
		}
	}
	return w
}

// PrefixMethod makes every data frame carry its delivery method in front
// (a link carrying a UDP peer). Call it before the first frame is written.
func (w *Writer) PrefixMethod() { w.prefixMethod = true }

// Direct reports whether senders may write frames to the socket
// themselves (WriteDirect): a plain socket of this platform.
func (w *Writer) Direct() bool { return w.raw != nil }

// Write is coder/websocket's path to the socket (its control frames), and
// on a link first net/http's (the upgrade request).
func (w *Writer) Write(p []byte) (int, error) {
	w.own.Lock()
	defer w.own.Unlock()
	if w.broken {
		return 0, net.ErrClosed
	}
	if w.upgraded && len(p) > 0 && p[0]&0x0f == opClose {
		w.closeSent = true
	}
	return w.Conn.Write(p)
}

// WriteControl writes a control frame of the relay's own (a pong, a
// close: one whole frame) unless a close frame went out already, after
// which nothing may. The write is bounded by deadline: a peer that sends
// pings and never reads must not hold the reader, and the socket, for good
// (coder/websocket bounded its control frames by 5 s too). A write that
// fails may have left part of the frame on the wire: nothing may follow
// it.
func (w *Writer) WriteControl(p []byte, deadline time.Time) error {
	w.own.Lock()
	defer w.own.Unlock()
	if w.closeSent || w.broken {
		return nil
	}
	if p[0]&0x0f == opClose {
		w.closeSent = true
	}
	err := w.Conn.SetWriteDeadline(deadline)
	if err == nil {
		_, err = w.Conn.Write(p)
	}
	_ = w.Conn.SetWriteDeadline(time.Time{})
	if err != nil {
		w.broken = true
		return fmt.Errorf("failed to write a control frame: %w", err)
	}
	return nil
}

// WriteClose writes an unmasked close frame with code and text (at most
// 123 bytes) through WriteControl, bounded by deadline.
func (w *Writer) WriteClose(code uint16, text string, deadline time.Time) error {
	var b [4 + 123]byte
	out := append(b[:0], 0x80|opClose, byte(2+len(text)))
	out = binary.BigEndian.AppendUint16(out, code)
	return w.WriteControl(append(out, text...), deadline)
}

// WriteBatch writes every frame of batch as a binary message, in order,
// with as few system calls as the pooled buffer allows (one for a batch
// of game packets), and releases the frames. deadline, when not zero,
// bounds the writes.
func (w *Writer) WriteBatch(batch []*buf.Buf, deadline time.Time) error {
	bp := batchBufs.Get().(*[]byte)
	w.own.Lock()
	err := w.encodeAndWrite(batch, (*bp)[:0], deadline)
	w.own.Unlock()
	putBatchBuf(bp)
	buf.Release(batch)
	return err
}

// encodeAndWrite does WriteBatch's work with own held.
func (w *Writer) encodeAndWrite(batch []*buf.Buf, out []byte, deadline time.Time) error {
	if w.closeSent || w.broken {
		return net.ErrClosed
	}
	if !deadline.IsZero() {
		if err := w.Conn.SetWriteDeadline(deadline); err != nil {
			return fmt.Errorf("failed to set the write deadline: %w", err)
		}
		defer func() { _ = w.Conn.SetWriteDeadline(time.Time{}) }()
	}
	maxHeader, pre := maxFrameHeader, 0
	if w.masked {
		maxHeader = maxMaskedHeader
	}
	if w.prefixMethod {
		maxHeader++
		pre = 1 // never on a masked link: only the holder's side prefixes
	}
	for _, b := range batch {
		p := b.Frame()
		if len(out)+maxHeader+len(p) > cap(out) && len(out) > 0 {
			if _, err := w.Conn.Write(out); err != nil {
				return fmt.Errorf("failed to write frames: %w", err)
			}
			out = out[:0]
		}
		if len(out)+frameHeaderLen(len(p)+pre, w.masked)+pre+len(p) <= cap(out) {
			out = w.appendOne(out, b)
			continue
		}
		if err := w.writeLarge(out, b); err != nil {
			return err
		}
		out = out[:0]
	}
	if len(out) > 0 {
		if _, err := w.Conn.Write(out); err != nil {
			return fmt.Errorf("failed to write frames: %w", err)
		}
	}
	return nil
}

// writeLarge writes a frame larger than the whole batch buffer: its
// header (after out, which is empty), then its payload as is (masked in
// place on a link: the frame is ours until released).
func (w *Writer) writeLarge(out []byte, b *buf.Buf) error {
	p := b.Frame()
	switch {
	case w.prefixMethod:
		out = append(appendFrameHeader(out, len(p)+1), byte(b.Method))
	case w.masked:
		var key [4]byte
		out, key = appendMaskedHeader(out, len(p))
		maskBytes(p, p, key)
	default:
		out = appendFrameHeader(out, len(p))
	}
	if _, err := w.Conn.Write(out); err != nil {
		return fmt.Errorf("failed to write a frame header: %w", err)
	}
	if _, err := w.Conn.Write(p); err != nil {
		return fmt.Errorf("failed to write a frame: %w", err)
	}
	return nil
}

// appendOne appends b as one final binary frame, behind its delivery
// method where w prefixes it; out must have room for it.
func (w *Writer) appendOne(out []byte, b *buf.Buf) []byte {
	p := b.Frame()
	if w.prefixMethod {
		return append(append(appendFrameHeader(out, len(p)+1), byte(b.Method)), p...)
	}
	return w.appendFrame(out, p)
}

// appendFrame appends p as one final binary frame: masked with a fresh
// key on a link, as is on an accepted connection.
func (w *Writer) appendFrame(out, p []byte) []byte {
	if !w.masked {
		return append(appendFrameHeader(out, len(p)), p...)
	}
	out, key := appendMaskedHeader(out, len(p))
	n := len(out)
	out = out[:n+len(p)]
	maskBytes(out[n:], p, key)
	return out
}
