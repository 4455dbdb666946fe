package wstransport

import (
	"testing"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/core"
)

// TestCloseReasonsRoundTrip: a forwarded peer learns exactly the reason
// the holder closed its link with (its code and text), and an unknown
// 1012 from a holder still means "come back" (shutdown).
func TestCloseReasonsRoundTrip(t *testing.T) {
	for _, r := range []core.Reason{core.ReasonAuthFailed, core.ReasonUnsupported, core.ReasonTooBig, core.ReasonKicked,
		core.ReasonHostLeft, core.ReasonShutdown, core.ReasonRoomGone, core.ReasonSlowReceiver, core.ReasonMigrated, core.ReasonRejoin} {
		code, text := wsCode(r)
		if got := reasonOfClose(code, text); got != r {
			t.Errorf("%v closed as %d %q comes back as %v", r, code, text, got)
		}
	}
	if got := reasonOfClose(websocket.StatusServiceRestart, "something else"); got != core.ReasonShutdown {
		t.Errorf("an unknown 1012 comes back as %v, want %v", got, core.ReasonShutdown)
	}
	if got := reasonOfClose(websocket.StatusNormalClosure, "bye"); got == core.ReasonShutdown || got == core.ReasonKicked || got == core.ReasonHostLeft {
		t.Errorf("an unknown 1000 comes back as %v", got)
	}
}
