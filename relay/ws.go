package relay

import (
	"net"
	"net/http"

	"github.com/purrfly/purrfly/relay/internal/wstransport"
	"github.com/purrfly/purrfly/wire"
)

// wsHandler is the dedicated WebSocket listener's handler: any path.
func (s *Server) wsHandler() http.Handler {
	return wire.Common(wire.Handler(func(w http.ResponseWriter, r *http.Request) error {
		if !wstransport.IsUpgrade(r) {
			return wstransport.ErrUpgradeRequired
		}
		return s.serveWS(w, r)
	}))
}

// serveWS routes one WebSocket upgrade from a client (the Router, from
// its ?s= hint: a Fly-Replay to the machine serving it, or here), then
// hands it to the WebSocket transport, which upgrades and runs it.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) error {
	sid, err := wire.ParseSessionHint(r.URL.Query().Get(wire.SessionQueryParam))
	if err != nil {
		return err
	}
	if s.retireReplay(w, r, sid) || s.replayed(w, r, sid, s.wsRouter()) {
		return nil
	}
	return s.ws.Accept(w, r, wstransport.Peer{Ended: s.wsEnded(r)})
}

// wsEnded is what ends a WebSocket session of request r: the server
// forgets its hijacked TCP connection (rawConns) and stops counting it.
func (s *Server) wsEnded(r *http.Request) func() {
	raw, _ := r.Context().Value(rawConnKey{}).(net.Conn)
	return func() {
		s.raw.forget(raw)
		s.sessions.Done()
	}
}

// wsRouter is the Router consulted before an upgrade: the sticky router
// of a multi-machine relay, else Options.Router.
func (s *Server) wsRouter() Router {
	if s.mesh != nil {
		return func(sid wire.SessionID, r *http.Request) wire.RouteResult { return s.mesh.route(s.ctx, sid, r) }
	}
	return s.opts.Router
}
