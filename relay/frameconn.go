package relay

import (
	"github.com/purrfly/purrfly/relay/internal/buf"

	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Frame-level writes (issue 7). coder/websocket flushes every message, so
// a writer draining 64 queued frames made 64 write system calls. The
// relay keeps coder/websocket for the upgrade (and, on a link, for
// reading, ping/pong and the close handshake), but encodes its data
// frames here into one pooled buffer per batch, written with one system
// call. Two kinds of socket do
// this: an accepted connection (RFC 6455 server frames, unmasked: a 2 to
// 10 byte header and the payload) and a link to a holder machine (client
// frames, masked: linkconn.go).
//
// Both writers meet in frameConn, the net.Conn coder/websocket writes
// through: its mutex serialises a batch of ours against the control
// frames. On a link, once the handshake is over, coder/websocket only
// ever writes control frames (pong, close: at most 131 bytes, fully
// buffered in its own 4 KiB bufio.Writer and flushed at once), so each of
// its Write calls is one whole frame and frames never interleave. On an
// accepted connection the relay reads the frames itself (wsread.go) and
// writes its control frames (pong, close) whole through
// writeUnlessClosing; coder/websocket writes nothing after the upgrade.
//
// A third writer is a sender's reader writing one frame itself (issue 16,
// conn.send, writeDirect): it only tries the frame mutex, writes with one
// non-blocking system call on the descriptor, and when the socket takes
// part of the frame leaves the mutex locked and the rest in f.rest for the
// writer, so nothing (a pong, a close) can come between the frame's two
// parts.

// batchBufSize is the pooled buffer a batch is encoded into; a frame that
// does not fit an empty one is written as its header and payload.
const batchBufSize = 32 << 10

var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, batchBufSize); return &b }}

// putBatchBuf gives a batch buffer back, empty.
func putBatchBuf(bp *[]byte) {
	*bp = (*bp)[:0]
	batchBufs.Put(bp)
}

// frameConn is the TCP connection of one WebSocket whose data frames the
// relay writes itself. masked is static; upgraded and closeSent are
// guarded by mu with the socket's write side.
type frameConn struct {
	net.Conn
	masked bool // client frames (a link to a holder machine), masked per RFC 6455 5.3
	// prefixMethod puts each frame's delivery method in front of it: the
	// holder's side of a link carrying a UDP peer (wire.HeaderLinkFraming).
	// Set before the writer starts; static afterwards.
	prefixMethod bool

	// raw and writeFD are static once set (enableDirect, before the
	// connection is used): the socket's descriptor for direct writes.
	raw     syscall.RawConn
	writeFD func(fd uintptr) bool

	// mu is the frame mutex: whoever writes to the socket holds it for
	// whole frames. A direct write that leaves part of a frame keeps it
	// locked and hands it, with rest, to the writer (finishRest, dropRest).
	mu sync.Mutex
	// upgraded is set once the WebSocket handshake is over (at the hijack
	// for an accepted connection, after the dial for a link): from then
	// on every Write is one of coder/websocket's frames.
	upgraded  bool
	closeSent bool // a close frame went out, no data may follow
	// broken: half a frame is on the wire and never will be finished (a
	// failed write of a handed-off rest): nothing else may be written.
	broken bool
	// wout, wn and werr are a direct write's bytes and outcome, for
	// writeFD; rest is what it left of its frame (in restBuf, pooled)
	// for the writer. All guarded by mu.
	wout    []byte
	wn      int
	werr    error
	rest    []byte
	restBuf *[]byte
}

// Write is coder/websocket's path to the socket (its control frames), and
// on a link first net/http's (the upgrade request).
func (f *frameConn) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return 0, net.ErrClosed
	}
	if f.upgraded && len(p) > 0 && p[0]&0x0f == 0x8 {
		f.closeSent = true
	}
	return f.Conn.Write(p)
}

// writeUnlessClosing writes a control frame of the relay's own (a pong, a
// close: one whole frame, wsread.go) unless a close frame went out
// already, after which nothing may. The write is bounded by deadline: a
// peer that sends pings and never reads must not hold the reader, and the
// frame mutex, for good (coder/websocket bounded its control frames by
// 5 s too). A write that fails may have left part of the frame on the
// wire: nothing may follow it.
func (f *frameConn) writeUnlessClosing(p []byte, deadline time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closeSent || f.broken {
		return nil
	}
	if p[0]&0x0f == 0x8 {
		f.closeSent = true
	}
	err := f.Conn.SetWriteDeadline(deadline)
	if err == nil {
		_, err = f.Conn.Write(p)
	}
	_ = f.Conn.SetWriteDeadline(time.Time{})
	if err != nil {
		f.broken = true
		return fmt.Errorf("failed to write a control frame: %w", err)
	}
	return nil
}

// enableDirect lets senders write frames to f's socket themselves
// (writeDirect) when it is a plain socket of this platform. Conn must not
// change afterwards.
func (f *frameConn) enableDirect() *frameConn {
	if sc, ok := f.Conn.(syscall.Conn); ok && rawWriteSupported {
		if raw, err := sc.SyscallConn(); err == nil {
			f.raw = raw
			f.writeFD = f.rawWriteFD // bound once: no allocation per write
		}
	}
	return f
}

// writeDirect writes b as one frame with a non-blocking system call, for
// a sender that claimed the socket (conn.send); see directWriter. It never
// waits: not for the frame mutex (a control frame may be being written to
// a full socket), not for the socket.
func (f *frameConn) writeDirect(b *buf.Buf) directResult {
	if !f.mu.TryLock() {
		return directAgain
	}
	if f.closeSent || f.broken {
		// The conn is closing already, for the reason that sent the
		// close frame (or broke the socket): not a write error.
		f.mu.Unlock()
		buf.Put(b)
		return directClosing
	}
	bp := batchBufs.Get().(*[]byte)
	out := f.appendOne((*bp)[:0], b)
	f.wout, f.wn, f.werr = out, 0, nil
	err := f.raw.Write(f.writeFD)
	n, werr := f.wn, f.werr
	f.wout, f.werr = nil, nil
	var res directResult
	switch {
	case err != nil || werr != nil:
		res = directFailed
	case n == 0:
		res = directAgain // b stays the caller's
	case n < len(out):
		// The frame mutex stays locked: the rest goes out before any
		// other frame, the control frames included.
		f.rest, f.restBuf = out[n:], bp
		buf.Put(b)
		return directPartial
	default:
		res = directWhole
	}
	f.mu.Unlock()
	putBatchBuf(bp)
	if res != directAgain {
		buf.Put(b)
	}
	return res
}

// rawWriteFD is the raw write: once, whatever the socket takes.
func (f *frameConn) rawWriteFD(fd uintptr) bool {
	f.wn, f.werr = rawWrite(fd, f.wout)
	return true
}

// finishRest writes, blocking (bounded by deadline when it is not zero),
// what a direct write left of its frame, then releases the frame mutex it
// was handed with it. Only the writer calls it, after takeWrite reported
// the hand-off.
func (f *frameConn) finishRest(deadline time.Time) error {
	defer f.mu.Unlock()
	var err error
	if !deadline.IsZero() {
		err = f.Conn.SetWriteDeadline(deadline)
	}
	if err == nil {
		_, err = f.Conn.Write(f.rest)
	}
	if !deadline.IsZero() {
		_ = f.Conn.SetWriteDeadline(time.Time{})
	}
	f.releaseRest()
	if err != nil {
		f.broken = true
		return fmt.Errorf("failed to finish a frame: %w", err)
	}
	return nil
}

// dropRest gives up what a direct write left of its frame (the connection
// is being dropped) and releases the frame mutex: half a frame is on the
// wire, so nothing may follow it.
func (f *frameConn) dropRest() {
	f.broken = true
	f.releaseRest()
	f.mu.Unlock()
}

func (f *frameConn) releaseRest() {
	putBatchBuf(f.restBuf)
	f.rest, f.restBuf = nil, nil
}

// writeBatch writes every frame of batch as a binary message, in order,
// with as few system calls as the pooled buffer allows (one for a batch
// of game packets), and releases the frames. deadline, when not zero,
// bounds the writes.
func (f *frameConn) writeBatch(batch []*buf.Buf, deadline time.Time) error {
	bp := batchBufs.Get().(*[]byte)
	f.mu.Lock()
	err := f.encodeAndWrite(batch, (*bp)[:0], deadline)
	f.mu.Unlock()
	putBatchBuf(bp)
	buf.Release(batch)
	return err
}

// encodeAndWrite does writeBatch's work with f.mu held.
func (f *frameConn) encodeAndWrite(batch []*buf.Buf, out []byte, deadline time.Time) error {
	if f.closeSent || f.broken {
		return net.ErrClosed
	}
	if !deadline.IsZero() {
		if err := f.Conn.SetWriteDeadline(deadline); err != nil {
			return fmt.Errorf("failed to set the write deadline: %w", err)
		}
		defer func() { _ = f.Conn.SetWriteDeadline(time.Time{}) }()
	}
	maxHeader := maxFrameHeader
	if f.masked {
		maxHeader = maxMaskedHeader
	}
	if f.prefixMethod {
		maxHeader++
	}
	pre := 0
	if f.prefixMethod {
		pre = 1 // never on a masked link: only the holder's side prefixes
	}
	for _, b := range batch {
		p := b.Frame()
		if len(out)+maxHeader+len(p) > cap(out) && len(out) > 0 {
			if _, err := f.Conn.Write(out); err != nil {
				return fmt.Errorf("failed to write frames: %w", err)
			}
			out = out[:0]
		}
		if len(out)+frameHeaderLen(len(p)+pre, f.masked)+pre+len(p) <= cap(out) {
			out = f.appendOne(out, b)
			continue
		}
		if pre == 1 {
			out = append(appendFrameHeader(out, len(p)+1), byte(b.Method))
			if _, err := f.Conn.Write(out); err != nil {
				return fmt.Errorf("failed to write a frame header: %w", err)
			}
			out = out[:0]
			if _, err := f.Conn.Write(p); err != nil {
				return fmt.Errorf("failed to write a frame: %w", err)
			}
			continue
		}
		// Larger than the whole buffer: header, then the payload as is
		// (masked in place on a link: the frame is ours until released).
		if f.masked {
			var key [4]byte
			out, key = appendMaskedHeader(out, len(p))
			maskBytes(p, p, key)
		} else {
			out = appendFrameHeader(out, len(p))
		}
		if _, err := f.Conn.Write(out); err != nil {
			return fmt.Errorf("failed to write a frame header: %w", err)
		}
		out = out[:0]
		if _, err := f.Conn.Write(p); err != nil {
			return fmt.Errorf("failed to write a frame: %w", err)
		}
	}
	if len(out) > 0 {
		if _, err := f.Conn.Write(out); err != nil {
			return fmt.Errorf("failed to write frames: %w", err)
		}
	}
	return nil
}

// appendOne appends b as one final binary frame, behind its delivery
// method where f prefixes it; out must have room for it.
func (f *frameConn) appendOne(out []byte, b *buf.Buf) []byte {
	p := b.Frame()
	if f.prefixMethod {
		return append(append(appendFrameHeader(out, len(p)+1), byte(b.Method)), p...)
	}
	return f.appendFrame(out, p)
}

// appendFrame appends p as one final binary frame: masked with a fresh
// key on a link, as is on an accepted connection.
func (f *frameConn) appendFrame(out, p []byte) []byte {
	if !f.masked {
		return append(appendFrameHeader(out, len(p)), p...)
	}
	out, key := appendMaskedHeader(out, len(p))
	n := len(out)
	out = out[:n+len(p)]
	maskBytes(out[n:], p, key)
	return out
}

// frameHeaderLen is the length of the header of a frame carrying n bytes.
func frameHeaderLen(n int, masked bool) int {
	h := 2
	switch {
	case n > 0xffff:
		h = 10
	case n >= 126:
		h = 4
	}
	if masked {
		h += 4
	}
	return h
}

// maxFrameHeader is the longest unmasked frame header.
const maxFrameHeader = 10

// appendFrameHeader appends the header of one unmasked, final, binary
// frame carrying n bytes (RFC 6455 section 5.2).
func appendFrameHeader(out []byte, n int) []byte {
	const finBinary = 0x80 | 0x2
	switch {
	case n < 126:
		return append(out, finBinary, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(out, finBinary, 126), uint16(n))
	}
	return binary.BigEndian.AppendUint64(append(out, finBinary, 127), uint64(n))
}

// hijackWriter hands coder/websocket a frameConn (through a readConn) at
// the hijack, so that the relay's writer can write frames on the same
// socket.
type hijackWriter struct {
	http.ResponseWriter
	fc *frameConn // set by Hijack
	rc *readConn  // set by Hijack: what coder/websocket reads through
}

func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// (Hijack clears the server's request deadlines, HTTPLimits: an
	// upgraded connection lives by the relay's own bounds.)
	if err := brw.Writer.Flush(); err != nil {
		_ = nc.Close()
		return nil, nil, fmt.Errorf("failed to flush the upgrade: %w", err)
	}
	h.fc = (&frameConn{Conn: nc, upgraded: true}).enableDirect()
	// coder/websocket keeps the reader and writer it is handed for the
	// connection's life: it gets small ones over a readConn
	// (readconn.go), not net/http's 4 KiB pair, which dies with the
	// handler. The bytes net/http read past the request go first.
	leftover, _ := brw.Reader.Peek(brw.Reader.Buffered())
	h.rc = newReadConn(h.fc, leftover)
	return h.rc, h.rc.bufio(), nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (h *hijackWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }
