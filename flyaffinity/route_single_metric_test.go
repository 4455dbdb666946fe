package flyaffinity

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/wire"
)

// Rule: with one machine in the set every Route is served here and counted
// as the "single" decision, never as "owner".
func TestRouteSingleMachineCountsSingle(t *testing.T) {
	f := startDNS(t, "148e21dad76789 sea")
	reg := prometheus.NewRegistry()
	cfg := testConfig(f, "148e21dad76789")
	cfg.Metrics = reg
	r := newTestResolver(t, cfg)
	for k := range 5 {
		sid := wire.SessionID(fmt.Sprintf("room-%d", k))
		if got := r.Route(sid, upgradeRequest(sid)); !got.Serve {
			t.Fatalf("single machine: Route(%q) = %+v, want serve", sid, got)
		}
	}
	const name = "purrfly_flyaffinity_route_decisions_total"
	if single, owner := counter(t, reg, name, "decision", "single"), counter(t, reg, name, "decision", "owner"); single != 5 || owner != 0 {
		t.Fatalf("decisions: single %v, owner %v; want 5, 0", single, owner)
	}
}
