package wsframe

import (
	"fmt"
	"time"

	"github.com/purrfly/purrfly/relay/internal/buf"
)

// DirectResult is how a direct write went.
type DirectResult uint8

const (
	DirectWhole   DirectResult = iota // the socket took the whole frame
	DirectPartial                     // it took part of it; the rest and the socket are the Rest's
	DirectAgain                       // it took nothing (full, or owned by another writer): the frame is the caller's again
	DirectFailed                      // the socket failed or was closed; the frame is lost with it
	DirectClosing                     // a close frame went out, or the socket is broken: the frame is dropped
)

// Rest is the socket's write side in transit, with what a direct write
// left of its frame (see the package doc). Whoever holds a non-zero Rest
// owns the socket: nothing else is written to it until Finish or Drop,
// exactly one of them, once. The zero Rest holds nothing.
type Rest struct{ w *Writer }

// Held reports whether r carries the socket.
func (r Rest) Held() bool { return r.w != nil }

// Finish writes the rest of the frame, blocking (bounded by deadline when
// it is not zero), and releases the socket.
func (r Rest) Finish(deadline time.Time) error {
	w := r.w
	w.own.Adopt()
	defer w.own.Unlock()
	var err error
	if !deadline.IsZero() {
		err = w.Conn.SetWriteDeadline(deadline)
	}
	if err == nil {
		_, err = w.Conn.Write(w.rest)
	}
	if !deadline.IsZero() {
		_ = w.Conn.SetWriteDeadline(time.Time{})
	}
	w.releaseRest()
	if err != nil {
		w.broken = true
		return fmt.Errorf("failed to finish a frame: %w", err)
	}
	return nil
}

// Drop gives up the rest of the frame (the connection is being dropped)
// and releases the socket: half a frame is on the wire, so nothing may
// follow it.
func (r Rest) Drop() {
	w := r.w
	w.own.Adopt()
	w.broken = true
	w.releaseRest()
	w.own.Unlock()
}

// WriteDirect writes b as one frame with a non-blocking system call, for
// a sender writing a frame itself. It never waits: not for the socket's
// ownership (a control frame may be being written to a full socket), not
// for the socket. It releases b, except for DirectAgain (nothing was
// written: b is the caller's). For DirectPartial the returned Rest owns
// the socket and what is left of the frame. The Writer must be Direct, and
// b at most MaxDirect bytes.
func (w *Writer) WriteDirect(b *buf.Buf) (DirectResult, Rest) {
	if !w.own.TryLock() {
		return DirectAgain, Rest{}
	}
	if w.closeSent || w.broken {
		// The conn is closing already, for the reason that sent the
		// close frame (or broke the socket): not a write error.
		w.own.Unlock()
		buf.Put(b)
		return DirectClosing, Rest{}
	}
	bp := batchBufs.Get().(*[]byte)
	out := w.appendOne((*bp)[:0], b)
	w.wout, w.wn, w.werr = out, 0, nil
	err := w.raw.Write(w.writeFD)
	n, werr := w.wn, w.werr
	w.wout, w.werr = nil, nil
	var res DirectResult
	switch {
	case err != nil || werr != nil:
		res = DirectFailed
	case n == 0:
		res = DirectAgain // b stays the caller's
	case n < len(out):
		// The socket stays owned: the rest goes out before any other
		// frame, the control frames included.
		w.rest, w.restBuf = out[n:], bp
		buf.Put(b)
		w.own.HandOff()
		return DirectPartial, Rest{w: w}
	default:
		res = DirectWhole
	}
	w.own.Unlock()
	putBatchBuf(bp)
	if res != DirectAgain {
		buf.Put(b)
	}
	return res, Rest{}
}

// rawWriteFD is the raw write: once, whatever the socket takes.
func (w *Writer) rawWriteFD(fd uintptr) bool {
	w.wn, w.werr = rawWrite(fd, w.wout)
	return true
}

func (w *Writer) releaseRest() {
	putBatchBuf(w.restBuf)
	w.rest, w.restBuf = nil, nil
}
