package wsframe

import (
	"bufio"
	"io"
	"sync"
	"syscall"
)

// The read side of an accepted connection, sized for idle connections.
// net/http hands a hijacked connection a 4 KiB bufio.Reader and a 4 KiB
// bufio.Writer, and coder/websocket keeps both for the connection's life:
// 8 KiB per connection that an idle one never uses. The relay gives
// coder/websocket small ones instead (ctlBufSize), which it needs only for
// the upgrade: after it the Reader reads the frames through the same
// 256-byte reader, which sits on readConn, which reads the socket into a
// pooled 4 KiB buffer taken only once the socket is readable and given
// back as soon as it has been consumed. A parked reader holds no read
// buffer; under load a read system call still takes up to 4 KiB at once,
// as net/http's buffer did. What is left in the small reader and in the
// pooled buffer after a message tells whether another one is already
// here (Reader.Next's more).

// ctlBufSize is the size of the bufio.Reader and bufio.Writer handed to
// coder/websocket: any frame header (at most 14 bytes) fits the reader,
// a whole control frame (2 + 125 bytes) the writer.
const ctlBufSize = 256

// readBufSize is the pooled read buffer; a read of at least that many
// bytes goes straight to the caller's slice.
const readBufSize = 4 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// readConn is the net.Conn an accepted connection is read through
// (coder/websocket for the upgrade, then the Reader); writes and Close
// are the Writer's. raw, readFD and br are static; the rest belongs to
// whoever is reading: Reader.mu serialises the reads, and RawConn.Read
// calls fillFD on the reading goroutine.
type readConn struct {
	*Writer
	raw     syscall.RawConn // nil: the socket has no raw access, read it directly
	readFD  func(fd uintptr) bool
	pending []byte  // bytes the HTTP server read past the upgrade request
	rbuf    *[]byte // pooled; held only while it has unread bytes
	rpos    int
	rend    int
	rerr    error // readFD's result

	// br is the 256-byte reader over r handed to coder/websocket at the
	// hijack (set by bufio, static), which the Reader reads through after
	// the upgrade.
	br *bufio.Reader
}

// newReadConn wraps w. leftover are bytes already read from the socket
// (a client's first frame sent right behind its upgrade request); they
// are copied.
func newReadConn(w *Writer, leftover []byte) *readConn {
	r := &readConn{Writer: w}
	if len(leftover) > 0 {
		r.pending = append([]byte(nil), leftover...)
	}
	if sc, ok := w.Conn.(syscall.Conn); ok && rawReadSupported {
		if raw, err := sc.SyscallConn(); err == nil {
			r.raw = raw
			r.readFD = r.fillFD // bound once: no allocation per read
		}
	}
	return r
}

// bufio returns the small reader and writer coder/websocket gets at the
// hijack.
func (r *readConn) bufio() *bufio.ReadWriter {
	r.br = bufio.NewReaderSize(r, ctlBufSize)
	return bufio.NewReadWriter(r.br, bufio.NewWriterSize(r.Writer, ctlBufSize))
}

// Read serves what the HTTP server had buffered, then the pooled buffer,
// and refills it from the socket once the socket is readable.
func (r *readConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(r.pending) > 0 {
		n := copy(p, r.pending)
		r.pending = r.pending[n:]
		if len(r.pending) == 0 {
			r.pending = nil
		}
		return n, nil
	}
	if r.rbuf == nil {
		if r.raw == nil || len(p) >= readBufSize {
			return r.Writer.Conn.Read(p)
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*r.rbuf)[r.rpos:r.rend])
	r.rpos += n
	if r.rpos == r.rend {
		r.release()
	}
	return n, nil
}

// fill reads what the socket has into a pooled buffer, waiting (without
// one) until it has something.
func (r *readConn) fill() error {
	r.rerr = nil
	if err := r.raw.Read(r.readFD); err != nil {
		r.release()
		return err
	}
	if r.rerr != nil {
		r.release()
		return r.rerr
	}
	return nil
}

// fillFD is the raw read: it takes a buffer, reads, and when the socket
// has nothing gives the buffer back and asks the poller to wait.
func (r *readConn) fillFD(fd uintptr) bool {
	if r.rbuf == nil {
		r.rbuf = readBufs.Get().(*[]byte)
	}
	n, wouldBlock, err := rawRead(fd, *r.rbuf)
	switch {
	case wouldBlock:
		r.release()
		return false
	case err != nil:
		r.rerr = err
	case n == 0:
		r.rerr = io.EOF
	default:
		r.rpos, r.rend = 0, n
	}
	return true
}

func (r *readConn) release() {
	if r.rbuf != nil {
		readBufs.Put(r.rbuf)
		r.rbuf = nil
	}
	r.rpos, r.rend = 0, 0
}
