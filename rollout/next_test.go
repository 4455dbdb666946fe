package rollout

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestNextStep: every failure ends with what to do about it, fitted to
// how the rollout stopped, and a relay left drained is named first with
// the call that gives it back.
func TestNextStep(t *testing.T) {
	interrupted := &interruption{ctxErr: context.Canceled, cause: errors.New("interrupt signal received"), err: context.Canceled}
	for _, tc := range []struct {
		name    string
		f       Failure
		drained string
		want    []string
	}{
		{"interrupted", Failure{Phase: PhaseRelays, App: "a", Machine: "m1", Err: interrupted}, "",
			[]string{"its leases were released; re-run the rollout"}},
		{"lease held", Failure{Phase: PhaseRelays, App: "a", Machine: "m1", Err: failf(&LeaseHeldError{Machine: "m1"}, "could not lease")}, "",
			[]string{"another deploy (or an operator) holds the lease", "re-run the rollout"}},
		{"rolled back", Failure{Phase: PhaseRelays, App: "a", Machine: "m1", Err: errors.New("x"), Rollback: true, RolledBack: true}, "",
			[]string{"fix the image", "fly logs -a a -i m1"}},
		{"machine failed", Failure{Phase: PhaseRelays, App: "a", Machine: "m1", Err: errors.New("x")}, "",
			[]string{"fly logs -a a -i m1", "re-run the rollout", "--rollback puts a failed machine back"}},
		{"registration", Failure{Phase: PhaseRegister, Err: errors.New("x")}, "",
			[]string{"purrctl smoke", "re-run the rollout"}},
		{"launch", Failure{Phase: PhaseLaunch, Err: errors.New("x")}, "",
			[]string{"re-run the launch", "only what is still missing"}},
		{"plan", Failure{Phase: PhasePlan, Err: errors.New("x")}, "",
			[]string{"fly/rollout.toml", "re-run the rollout"}},
		{"left drained", Failure{Phase: PhaseRelays, App: "a", Machine: "m1", Err: interrupted}, "b1",
			[]string{"boot b1 of machine m1 is still drained", "POST http://bal/v1/instances/b1/undrain", "its leases were released"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nextStep(&tc.f, tc.drained, "http://bal/v1/instances/b1/undrain")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("next step %q lacks %q", got, w)
				}
			}
			if tc.name != "machine failed" && strings.Contains(got, "--rollback") {
				t.Errorf("next step %q offers --rollback", got)
			}
		})
	}
}
