package wstest

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// Peer is a minimal PurrNet-speaking WebSocket test peer. TB fails the
// test on any error; WS is the client connection, for a test that writes,
// reads or closes it directly.
type Peer struct {
	TB testing.TB
	WS *websocket.Conn
}

// DialConn dials url with coder/websocket (within 5 s) and a 1 MiB read
// limit; the connection is closed when the test ends.
func DialConn(tb testing.TB, url string) *websocket.Conn {
	tb.Helper()
	return DialConnWith(tb, url, 5*time.Second, nil)
}

// DialConnWith is DialConn with coder/websocket's options and a bound of
// its own on the dial.
func DialConnWith(tb testing.TB, url string, timeout time.Duration, opts *websocket.DialOptions) *websocket.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		tb.Fatalf("dial %s: %v", url, err)
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	ws.SetReadLimit(1 << 20)
	tb.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

// Dial is a Peer on a connection DialConn opened to url.
func Dial(tb testing.TB, url string) *Peer {
	tb.Helper()
	return &Peer{TB: tb, WS: DialConn(tb, url)}
}

// Send writes b as one binary message within 5 s.
func (p *Peer) Send(b []byte) {
	p.TB.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.WS.Write(ctx, websocket.MessageBinary, b); err != nil {
		p.TB.Fatalf("send: %v", err)
	}
}

// Recv reads one message within 5 s, failing the test unless it is binary.
func (p *Peer) Recv() []byte {
	p.TB.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	typ, b, err := p.WS.Read(ctx)
	if err != nil {
		p.TB.Fatalf("recv: %v", err)
	}
	if typ != websocket.MessageBinary {
		p.TB.Fatalf("recv: got a text message")
	}
	return b
}

// Closed reads until the connection ends and returns its close status
// (-1 when it ended without a close frame), failing the test if it is
// still open after 5 s.
func (p *Peer) Closed() websocket.StatusCode {
	p.TB.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		_, _, err := p.WS.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				p.TB.Fatalf("connection still open after 5 s")
			}
			return websocket.CloseStatus(err)
		}
	}
}

// Auth sends the authentication message for room and returns the relay's
// one-byte reply.
func (p *Peer) Auth(room, secret string) byte {
	p.TB.Helper()
	p.Send(wire.Auth{RoomName: room, ClientSecret: secret}.Marshal())
	b := p.Recv()
	if len(b) != 1 {
		p.TB.Fatalf("auth reply %v, want one byte", b)
	}
	return b[0]
}

// ExpectToHost reads one relay -> host packet of the given type.
func (p *Peer) ExpectToHost(typ byte) wire.ToHostPacket {
	p.TB.Helper()
	b := p.Recv()
	pk, err := wire.ParseToHostPacket(b)
	if err != nil || pk.Type != typ {
		p.TB.Fatalf("got %v (%v), want host packet type %d", b, err, typ)
	}
	return pk
}
