package rollout_test

import (
	"errors"
	"testing"

	"github.com/purrfly/purrfly/rollout"
)

// TestFailureMessage: a failure says where the rollout stopped (the
// machine and app when there is one), why, the underlying error once, and
// what became of a rollback.
func TestFailureMessage(t *testing.T) {
	boom := errors.New("connection refused")
	for _, tc := range []struct {
		f    rollout.Failure
		want string
	}{
		{rollout.Failure{Phase: rollout.PhaseRelays, Machine: "m1", App: "relay-a", Reason: "could not drain"},
			"rollout stopped in phase relays at machine m1 of relay-a: could not drain"},
		{rollout.Failure{Phase: rollout.PhaseSmoke, Reason: "smoke failed", Err: boom},
			"rollout stopped in phase smoke: smoke failed: connection refused"},
		{rollout.Failure{Phase: rollout.PhaseSmoke, Reason: "smoke failed: connection refused", Err: boom},
			"rollout stopped in phase smoke: smoke failed: connection refused"},
		{rollout.Failure{Phase: rollout.PhaseRelays, Machine: "m1", App: "a", Reason: "unhealthy", Rollback: true, RolledBack: true},
			"rollout stopped in phase relays at machine m1 of a: unhealthy (rolled back: the machine runs its previous image again)"},
		{rollout.Failure{Phase: rollout.PhaseRelays, Machine: "m1", App: "a", Reason: "unhealthy", Rollback: true, RollbackErr: boom},
			"rollout stopped in phase relays at machine m1 of a: unhealthy (rollback failed: connection refused)"},
		{rollout.Failure{Phase: rollout.PhaseRelays, Machine: "m1", App: "a", Reason: "unhealthy", Next: "re-run"},
			"rollout stopped in phase relays at machine m1 of a: unhealthy; next: re-run"},
	} {
		if got := tc.f.Error(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
