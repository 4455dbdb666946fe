package balancer

import (
	"io"
	"net/http"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// TestAuthorizeAndActivateAnswersAreChecked: an authorization answer is
// forwarded only with its grant, the claim id asked for and an expiry, and
// an activation answer only for the claim id asked for (with the relay's
// registered host injected); anything less is a sanitized retryable 502.
// An authorization answers the grant with its claim id, incarnation,
// generation, promoted player and expiry; an activation answers the claim
// id back with the room's live fence, so a caller can check every value
// it sent.
func TestAuthorizeAndActivateAnswersAreChecked(t *testing.T) {
	h := newHarness(t, nil)
	f := newFakeRelay(t, "eu")
	roomOn(t, h, f, "room")
	grant := wire.MigrationGrant{Grant: "grant-1", ClaimID: "claim-1", Incarnation: "inc-1", Generation: 0,
		PromotedPlayerID: "42", ExpiresAt: "2026-01-01T00:00:30Z"}
	activation := func() wire.MigrationActivation {
		st := claimAnswer("room").MigrationState
		st.HostPhase, st.HostActive, st.ClaimPending = wire.HostPhaseActive, true, false
		return wire.MigrationActivation{MigrationState: st, ClaimID: "claim-1"}
	}
	answer := func(body any) {
		f.set(func(f *fakeRelay) {
			f.migrate = func(w http.ResponseWriter, r *http.Request) {
				if s, ok := body.(string); ok {
					_, _ = io.WriteString(w, s)
					return
				}
				wire.WriteJSON(w, http.StatusOK, body)
			}
		})
	}
	call := func(op wire.MigrationOp, out any) *wire.Error {
		t.Helper()
		status, body, _ := h.do(op.Method(), op.PublicPath(), migHeaders(op, "room"), nil)
		return decodeAnswer(t, status, body, out)
	}

	answer(grant)
	var g wire.MigrationGrant
	noErr(t, call(wire.OpAuthorize, &g))
	if g != grant {
		t.Fatalf("authorization answered %+v, want the relay's %+v", g, grant)
	}
	answer(activation())
	var a wire.MigrationActivation
	noErr(t, call(wire.OpActivate, &a))
	if a.ClaimID != "claim-1" || a.HostPhase != wire.HostPhaseActive || a.Host != "eu.relay.test" {
		t.Fatalf("activation answered %+v, want the relay's with the registered host", a)
	}

	noGrant, otherClaim, noExpiry := grant, grant, grant
	noGrant.Grant, otherClaim.ClaimID, noExpiry.ExpiresAt = "", "claim-2", ""
	otherActivation := activation()
	otherActivation.ClaimID = "claim-2"
	for _, c := range []struct {
		what string
		op   wire.MigrationOp
		body any
	}{
		{"an authorization without a grant", wire.OpAuthorize, noGrant},
		{"an authorization for another claim", wire.OpAuthorize, otherClaim},
		{"an authorization without an expiry", wire.OpAuthorize, noExpiry},
		{"an authorization that is not JSON", wire.OpAuthorize, "<html>leaky</html>"},
		{"an activation of another claim", wire.OpActivate, otherActivation},
		{"an activation that is not JSON", wire.OpActivate, "<html>leaky</html>"},
	} {
		answer(c.body)
		e := call(c.op, nil)
		if e == nil || e.Code != wire.ErrRelayBadAnswer.Code || e.Status != http.StatusBadGateway || !e.Retryable {
			t.Fatalf("%s: %v, want a retryable 502 relay_bad_answer", c.what, e)
		}
	}
}
