package wsframe

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Hijacker is the http.ResponseWriter an accepted connection is upgraded
// through (coder/websocket's Accept hijacks it): it hands the library a
// Writer, through the small read side (readConn), so that the relay's
// Reader and Writer work on the same socket afterwards.
type Hijacker struct {
	http.ResponseWriter
	w  *Writer   // set by Hijack
	rc *readConn // set by Hijack: what coder/websocket reads through
}

// Hijack takes the connection from net/http: what net/http buffered of
// the answer (the 101) is flushed, and the bytes it read past the request
// go first to the reader.
func (h *Hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// (Hijack clears the server's request deadlines: an upgraded
	// connection lives by the relay's own bounds.)
	if err := brw.Writer.Flush(); err != nil {
		_ = nc.Close()
		return nil, nil, fmt.Errorf("failed to flush the upgrade: %w", err)
	}
	h.w = NewWriter(nc, false)
	// coder/websocket keeps the reader and writer it is handed for the
	// connection's life: it gets small ones over a readConn, not net/http's
	// 4 KiB pair, which dies with the handler.
	leftover, _ := brw.Reader.Peek(brw.Reader.Buffered())
	h.rc = newReadConn(h.w, leftover)
	return h.rc, h.rc.bufio(), nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (h *Hijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// Writer is the hijacked socket's writer (nil before the hijack).
func (h *Hijacker) Writer() *Writer { return h.w }

// Reader reads the hijacked socket's frames, messages of up to limit
// bytes (at most wire.MaxMessageSize), each whole within stall of its
// first byte (0: no bound); nil before the hijack.
func (h *Hijacker) Reader(limit int, stall time.Duration) *Reader {
	if h.rc == nil {
		return nil
	}
	r := newReader(h.rc, limit)
	r.stall = stall
	return r
}
