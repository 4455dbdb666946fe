package balancer

import (
	"fmt"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// TestTombstoneRetentionDefaultsTo3600Seconds: the tombstone retention is
// an hour unless ROOM_PUBLICATION_TOMBSTONE_RETENTION_SECONDS sets a
// positive value; zero or less means the hour again. This is the balancer's side
// (cmd/purrctl's test checks the variable's name): left unset, zero or
// negative, a released publication stays fenced for exactly an hour, a
// second short of it still fenced, at the hour accepted again.
func TestTombstoneRetentionDefaultsTo3600Seconds(t *testing.T) {
	for _, set := range []time.Duration{0, -5 * time.Second} {
		t.Run(fmt.Sprintf("TombstoneRetention=%v", set), func(t *testing.T) {
			h := newHarness(t, func(o *Options) {
				o.TombstoneRetention = set
				o.HealthInterval = 1000 * time.Hour // the relay stays registered for the hour
				o.RelayExpiry = 1000 * time.Hour
			})
			a := newFakeRelay(t, "eu")
			a.register(h)
			wantStatuses(t, a.publish(h, pub("room", "e1", 1, 0)), wire.PubApplied)
			wantStatuses(t, a.unregister(h, wire.Removal{Name: "room", Epoch: "e1", Revision: 1}), wire.RemApplied)

			h.clk.Advance(3599 * time.Second)
			h.s.st.cleanup()
			if got := a.publish(h, pub("room", "e1", 2, 0)); got[0] != wire.PubFenced {
				t.Fatalf("a delayed publication 3599 s after the release: %s, want fenced (the default horizon is 3600 s)", got[0])
			}
			h.clk.Advance(time.Second)
			h.s.st.cleanup()
			if got := a.publish(h, pub("room", "e1", 2, 0)); got[0] != wire.PubApplied {
				t.Fatalf("a delayed publication 3600 s after the release: %s, want applied (the default horizon is 3600 s)", got[0])
			}
		})
	}
}
