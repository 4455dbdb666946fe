package wstransport

import (
	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/wsframe"
)

// The core's close reasons as WebSocket close codes and texts: what a
// peer is told (wsCode), what a holder's close frame on a link means for
// the forwarded peer (reasonOfClose), and why a reader that stopped ends
// its connection (reasonOfEnd).

// wsCode is the WebSocket close code and text for a reason.
func wsCode(r core.Reason) (websocket.StatusCode, string) {
	switch r {
	case core.ReasonAuthFailed:
		return websocket.StatusPolicyViolation, "authentication failed"
	case core.ReasonUnsupported:
		return websocket.StatusUnsupportedData, "binary messages only"
	case core.ReasonTooBig:
		return wsframe.CloseTooBig, wsframe.TooBigText
	case core.ReasonKicked:
		return websocket.StatusNormalClosure, "kicked"
	case core.ReasonHostLeft:
		return websocket.StatusNormalClosure, "host left"
	case core.ReasonShutdown:
		return websocket.StatusServiceRestart, "relay restarting"
	case core.ReasonRoomGone:
		return websocket.StatusServiceRestart, "room moved"
	case core.ReasonMigrated:
		return websocket.StatusNormalClosure, "host migrated"
	case core.ReasonRejoin:
		return websocket.StatusServiceRestart, "host ready, reconnect"
	case core.ReasonRoomClosed:
		return websocket.StatusNormalClosure, "room closed"
	case core.ReasonSlowReceiver, core.ReasonQueueOverflow:
		return websocket.StatusPolicyViolation, "too slow"
	}
	return websocket.StatusNormalClosure, ""
}

// reasonOfClose maps a close frame from a holder machine (what wsCode
// wrote there) back to the core's reason, for the forwarded peer.
func reasonOfClose(code websocket.StatusCode, text string) core.Reason {
	for _, r := range [...]core.Reason{core.ReasonAuthFailed, core.ReasonUnsupported, core.ReasonTooBig, core.ReasonKicked,
		core.ReasonHostLeft, core.ReasonShutdown, core.ReasonRoomGone, core.ReasonSlowReceiver, core.ReasonMigrated, core.ReasonRejoin, core.ReasonRoomClosed} {
		if c, t := wsCode(r); c == code && t == text {
			return r
		}
	}
	if code == websocket.StatusServiceRestart {
		return core.ReasonShutdown
	}
	return core.ReasonClientLeft // a normal closure: 1000, no text
}

// reasonOfEnd is why a connection whose reader stopped ends.
func reasonOfEnd(end wsframe.End) core.Reason {
	switch end {
	case wsframe.EndUnsupported:
		return core.ReasonUnsupported
	case wsframe.EndTooBig:
		return core.ReasonTooBig
	case wsframe.EndTimeout:
		return core.ReasonAuthTimeout
	case wsframe.EndWriteFailed:
		return core.ReasonWriteError
	case wsframe.EndStalled:
		return core.ReasonPeerTimeout
	}
	return core.ReasonPeerClosed
}
