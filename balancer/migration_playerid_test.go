package balancer

import (
	"net/http"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// TestMigrationPlayerIDPastTwentyDigits: a promoted_player_id of 21 digits
// or more, sent to the balancer, is 400 invalid_promoted_player_id (it was
// bad_header), and the relay is never asked.
func TestMigrationPlayerIDPastTwentyDigits(t *testing.T) {
	h := newHarness(t, nil)
	f := newFakeRelay(t, "eu")
	roomOn(t, h, f, "room")
	asked := false
	f.set(func(f *fakeRelay) {
		f.migrate = func(w http.ResponseWriter, r *http.Request) { asked = true; wire.WriteError(w, wire.ErrInternal) }
	})
	for _, op := range []wire.MigrationOp{wire.OpAuthorize, wire.OpClaim, wire.OpActivate} {
		hdr := migHeaders(op, "room")
		for k := range hdr {
			if strings.EqualFold(k, wire.HeaderPromotedPlayerID) {
				hdr[k] = strings.Repeat("7", 21)
			}
		}
		st, body, _ := h.do(http.MethodPost, op.PublicPath(), hdr, nil)
		wantErrBody(t, st, body, http.StatusBadRequest, wire.ErrBadPlayerID.Code)
	}
	f.set(func(f *fakeRelay) {
		if asked {
			t.Error("the relay was asked about a claim with an invalid player id")
		}
	})
}
