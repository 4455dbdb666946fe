package wire

import (
	"net/http"
	"testing"
)

// Rule: current is the one read-only migration call, a GET; authorize,
// claim and activate change state and are POSTs.
func TestMigrationOpMethodAndMutating(t *testing.T) {
	for _, c := range []struct {
		op       MigrationOp
		name     string
		method   string
		mutating bool
	}{
		{OpCurrent, "current", http.MethodGet, false},
		{OpAuthorize, "authorize", http.MethodPost, true},
		{OpClaim, "claim", http.MethodPost, true},
		{OpActivate, "activate", http.MethodPost, true},
	} {
		if c.op.String() != c.name || c.op.Method() != c.method || c.op.Mutating() != c.mutating {
			t.Errorf("op %d = %s %s mutating %v, want %s %s mutating %v", c.op,
				c.op.String(), c.op.Method(), c.op.Mutating(), c.name, c.method, c.mutating)
		}
	}
}
