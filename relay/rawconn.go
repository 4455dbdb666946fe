package relay

import (
	"context"
	"net"
	"net/http"

	"github.com/purrfly/purrfly/internal/lockrank"
)

// rawConnKey carries the accepted net.Conn in a request's context so that
// a WebSocket session can forget its TCP connection when it ends.
type rawConnKey struct{}

func withRawConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, rawConnKey{}, c)
}

// rawConns tracks accepted TCP connections, hijacked ones included (which
// http.Server forgets), so that a close that hangs on a peer that neither
// reads nor answers can be ended by closing the socket.
type rawConns struct {
	mu lockrank.Mutex
	m  map[net.Conn]struct{} // guarded by mu
}

// track is the http.Server ConnState hook.
func (t *rawConns) track(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		t.mu.Lock()
		if t.m == nil {
			t.m = make(map[net.Conn]struct{})
		}
		t.m[c] = struct{}{}
		t.mu.Unlock()
	case http.StateClosed:
		t.forget(c)
	}
}

func (t *rawConns) forget(c net.Conn) {
	if c == nil {
		return
	}
	t.mu.Lock()
	delete(t.m, c)
	t.mu.Unlock()
}

func (t *rawConns) closeAll() {
	t.mu.Lock()
	conns := make([]net.Conn, 0, len(t.m))
	for c := range t.m {
		conns = append(conns, c)
	}
	clear(t.m)
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
