package wsframe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// FuzzFrameReader: the relay's own frame reader (Reader) against
// coder/websocket's, which read accepted connections before it. For any
// bytes a peer sends after the upgrade, both read the same binary
// messages, in order, and end the same way: at a text message, at a
// message over the limit, or on anything else (a close, a breach of the
// framing, the end of the stream), but for one deviation on purpose.
//
// The relay refuses a frame announcing more than the limit at its header;
// coder/websocket only once it has read past the limit of its payload. So
// when the stream ends before that much payload, the relay says "over the
// limit" where coder/websocket ran out of stream. There coder/websocket is
// asked again with the payload the header announced (limit+1 more bytes):
// it must then refuse too, so a relay that refused a message whose header
// did not ask for too much is still caught.
func FuzzFrameReader(f *testing.F) {
	le := func(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
	cat := func(frames ...[]byte) []byte {
		var s []byte
		for _, fr := range frames {
			s = append(s, fr...)
		}
		return s
	}
	f.Add(cat(clientFrame(opBinary, true, []byte("hello")), clientFrame(opBinary, true, nil)))
	f.Add(cat(clientFrame(opBinary, false, []byte("he")), clientFrame(opPing, true, []byte("p")),
		clientFrame(opContinuation, true, []byte("llo")), clientFrame(opClose, true, le(1000))))
	f.Add(cat(clientFrame(opBinary, true, make([]byte, 300)), clientFrame(opText, true, []byte("t"))))
	f.Add(cat(clientFrame(opBinary, false, make([]byte, 200)), clientFrame(opContinuation, true, make([]byte, 57))))
	f.Add(clientFrame(opBinary, true, make([]byte, 257)))
	f.Add(cat(clientFrame(opContinuation, true, []byte("x"))))
	f.Add(cat(clientFrame(opPong, true, []byte("x")), clientFrame(opBinary, true, []byte("y")), clientFrame(0xb, true, nil)))
	f.Add([]byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4, 'a', 'b', 'c', 'd', 'e'})
	f.Add([]byte{0x82, 0x05, 'a', 'b', 'c', 'd', 'e'})
	const limit = 256
	f.Fuzz(func(t *testing.T, stream []byte) {
		theirs, theirEnd := coderReads(t, stream, limit)
		ours, ourEnd, ranOut := relayReads(t, stream, limit)
		if ourEnd == endBig && theirEnd == endOther {
			theirs, theirEnd = coderReads(t, append(stream[:len(stream):len(stream)], make([]byte, limit+1)...), limit)
		}
		if len(theirs) == len(ours)+1 && theirEnd == endOther && ranOut {
			// coder/websocket takes the end of the stream right before a
			// frame's payload for the end of the message, and hands out
			// the message cut short; the relay's reader does not. Only
			// there: a relay that refused a good last message (a close
			// frame written) is caught.
			theirs = theirs[:len(ours)]
		}
		if len(ours) != len(theirs) {
			t.Fatalf("relay read %d messages (then %v), coder/websocket %d (then %v)", len(ours), ourEnd, len(theirs), theirEnd)
		}
		for i := range ours {
			if string(ours[i]) != string(theirs[i]) {
				t.Fatalf("message %d: relay %x, coder/websocket %x", i, ours[i], theirs[i])
			}
		}
		if ourEnd != theirEnd {
			t.Fatalf("after %d messages the relay ended with %v, coder/websocket with %v", len(ours), ourEnd, theirEnd)
		}
	})
}

// How a reading ended, in the terms both readers share.
type readEnd string

const (
	endText  readEnd = "text message"
	endBig   readEnd = "message over the limit"
	endOther readEnd = "close, breach or end"
)

// streamConn is a connection whose peer sent stream and then closed its
// side (reads end with io.EOF) and takes whatever is written to it.
type streamConn struct {
	net.Conn // nil: only the methods below are used
	r        io.Reader
	wrote    []byte // what was written to it
}

func newStreamConn(stream []byte) *streamConn { return &streamConn{r: bytes.NewReader(stream)} }

func (c *streamConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *streamConn) Write(p []byte) (int, error) {
	c.wrote = append(c.wrote, p...)
	return len(p), nil
}

func (c *streamConn) Close() error { return nil }

func (c *streamConn) SetDeadline(time.Time) error { return nil }

func (c *streamConn) SetReadDeadline(time.Time) error { return nil }

func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

// relayReads reads stream with a Reader; ranOut is whether it ended
// at the end of the stream, without writing a close frame (a breach's, a
// refusal's or the answer to the peer's).
func relayReads(t *testing.T, stream []byte, limit int) (msgs [][]byte, end readEnd, ranOut bool) {
	sc := newStreamConn(stream)
	rc := newReadConn(NewWriter(sc, false), nil)
	rc.bufio()
	r := newReader(rc, limit)
	msgs, end = readAll(func() (*buf.Buf, End) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.next()
	})
	return msgs, end, end == endOther && !wroteClose(sc.wrote)
}

// readAll reads messages with next until it ends them, and says how.
func readAll(next func() (*buf.Buf, End)) ([][]byte, readEnd) {
	var msgs [][]byte
	for {
		b, reason := next()
		switch reason {
		case EndNone:
			msgs = append(msgs, append([]byte{}, b.Frame()...))
			buf.Put(b)
			continue
		case EndUnsupported:
			return msgs, endText
		case EndTooBig:
			return msgs, endBig
		}
		return msgs, endOther
	}
}

// wroteClose reports whether the relay's control frames in w (unmasked,
// each at most 127 bytes) include a close frame.
func wroteClose(w []byte) bool {
	for len(w) >= 2 {
		if w[0]&0x0f == opClose {
			return true
		}
		w = w[min(len(w), 2+int(w[1]&0x7f)):]
	}
	return false
}

// coderReads reads stream with coder/websocket, as the relay's accepted
// connections were read before its own reader (wsRead, at the limit).
func coderReads(t *testing.T, stream []byte, limit int) ([][]byte, readEnd) {
	ws := acceptOver(t, newStreamConn(stream))
	defer ws.CloseNow()
	ws.SetReadLimit(int64(limit))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The relay's read path before its own reader.
	return readAll(func() (*buf.Buf, End) { return wsRead(ctx, ws) })
}

// acceptOver is a coder/websocket server connection over conn, upgraded
// from a client's handshake.
func acceptOver(tb testing.TB, conn net.Conn) *websocket.Conn {
	tb.Helper()
	r, _ := http.NewRequest(http.MethodGet, "http://relay/", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	ws, err := websocket.Accept(&pipeHijacker{conn: conn, h: http.Header{}}, r, &websocket.AcceptOptions{
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		tb.Fatalf("Accept: %v", err)
	}
	return ws
}

// pipeHijacker is the http.ResponseWriter coder/websocket's Accept
// upgrades: it hands over conn.
type pipeHijacker struct {
	conn net.Conn
	h    http.Header
}

func (w *pipeHijacker) Header() http.Header { return w.h }

func (w *pipeHijacker) WriteHeader(int) {}

func (w *pipeHijacker) Write(b []byte) (int, error) { return len(b), nil }

func (w *pipeHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.conn, bufio.NewReadWriter(bufio.NewReader(w.conn), bufio.NewWriter(w.conn)), nil
}

// How accepted connections were read before the relay read their frames
// itself (Reader): through coder/websocket. FuzzFrameReader holds the
// Reader to it.

// wsRead reads one binary message into a pooled buffer (which the caller
// owns), or returns why the connection ends.
func wsRead(ctx context.Context, ws *websocket.Conn) (*buf.Buf, End) {
	typ, rd, err := ws.Reader(ctx)
	if err != nil {
		return nil, readFailure(err, ctx)
	}
	if typ != websocket.MessageBinary {
		return nil, EndUnsupported
	}
	b, err := readMessage(rd)
	if err != nil {
		return nil, readFailure(err, ctx)
	}
	return b, EndNone
}

func readFailure(err error, authCtx context.Context) End {
	switch {
	case errors.Is(err, websocket.ErrMessageTooBig), errors.Is(err, buf.ErrTooBig):
		return EndTooBig
	case errors.Is(authCtx.Err(), context.DeadlineExceeded):
		return EndTimeout
	}
	return EndClosed
}

// readMessage reads one message from r into a pooled buffer, leaving
// headroom bytes free in front. It starts with the smallest class and moves
// up only when the message does not fit, so small game packets never touch
// a 64 KiB buffer. The caller owns the result.
func readMessage(r io.Reader) (*buf.Buf, error) {
	return buf.ReadInto(r, buf.Headroom, wire.MaxMessageSize)
}
