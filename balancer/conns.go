package balancer

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// freshConns tracks the connections that have not sent a request yet.
// http.Server.Shutdown waits up to 5 s for such a connection before it
// counts it idle, and proxies open them ahead of need (Fly's, flysim's:
// an http.Transport that dialed for a request another connection then
// served keeps the new one for later). A stopping balancer closes them
// instead: every allocation waits for the balancer's successor, so its
// shutdown must not wait on a connection nobody uses. Safe for concurrent
// use.
type freshConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{} // guarded by mu: in http.StateNew
}

// track is the server's ConnState hook.
func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st == http.StateNew {
		if f.conns == nil {
			f.conns = map[net.Conn]struct{}{}
		}
		f.conns[c] = struct{}{}
		return
	}
	delete(f.conns, c)
}

// closeAll closes every connection that has sent no request.
func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
		delete(f.conns, c)
	}
}

// freshSweep is how often a stopping balancer closes fresh connections
// while it waits for its requests in flight.
const freshSweep = 50 * time.Millisecond

// shutdownServer runs halt (which waits for srv's requests in flight),
// closing fresh connections meanwhile so they do not hold it.
func (s *Server) shutdownServer(srv *http.Server, halt func(*http.Server) error) error {
	done := make(chan error, 1)
	go func() { done <- halt(srv) }()
	t := time.NewTicker(freshSweep) // wall clock: it bounds TCP connections, not logic
	defer t.Stop()
	for {
		s.fresh.closeAll()
		select {
		case err := <-done:
			return err
		case <-t.C:
		}
	}
}
