package relay

import (
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

// RouteResult is a Router's decision for one request: serve it on this
// machine, or hand it to Instance (the relay answers
// "Fly-Replay: instance=<Instance>" and does not upgrade).
type RouteResult struct {
	Serve    bool
	Instance string
}

// Router decides, before every WebSocket upgrade and before the internal
// room-allocation handler, where a session is served. sid is taken from the
// request's ?s= hint (empty when there is none). A nil Router serves every
// request here.
type Router func(sid wire.SessionID, r *http.Request) RouteResult
