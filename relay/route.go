package relay

import (
	"net/http"

	"github.com/purrfly/purrfly/wire"
)

// Router decides, before every WebSocket upgrade and before the internal
// room-allocation handler, where a session is served: here
// (wire.RouteResult.Serve), or on another machine, which the relay answers
// with "Fly-Replay: instance=<Instance>" without upgrading. sid is taken
// from the request's ?s= hint (empty when there is none). A nil Router
// serves every request here.
type Router func(sid wire.SessionID, r *http.Request) wire.RouteResult
