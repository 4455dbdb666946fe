package relay

import (
	"testing"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// TestOutboxDropsAnEntryOnlyWhenAppliedAlreadyOrSuperseded: a removal the
// balancer did not take stays in the outbox and goes again with every
// heartbeat, and leaves it only when the balancer says it applied it, had
// already applied that very removal, or ignored it because a newer
// incarnation holds the name. A status the relay does not
// know confirms nothing: the entry stays and the same removal is sent again
// on the next heartbeat, until one of the three confirming answers.
func TestOutboxDropsAnEntryOnlyWhenAppliedAlreadyOrSuperseded(t *testing.T) {
	for _, confirming := range []wire.RemovalStatus{wire.RemApplied, wire.RemAlready, wire.RemSuperseded} {
		t.Run(string(confirming), func(t *testing.T) {
			s, fb, fake := startRegistered(t)
			const unknown = wire.RemovalStatus("deferred") // no such status (yet)
			answer := func(st ...wire.RemovalStatus) {
				fb.mu.Lock()
				fb.unregOutcomes = st
				fb.mu.Unlock()
			}
			answer(unknown, unknown, unknown, unknown, unknown, unknown, unknown, unknown)

			hs, _ := mustAllocate(t, s, "room")
			host := join(t, s, "room", hs)
			_ = host.WS.Close(websocket.StatusNormalClosure, "")
			waitFor(t, "the unknown answer to be judged", func() bool {
				return counterValue(s.reg.m.removals.WithLabelValues(unknown.Label())) >= 1
			})
			if n := s.reg.outboxLen(); n != 1 {
				t.Fatalf("outbox holds %d entries after an unknown status, want the removal kept", n)
			}
			first := fb.lastUnregister().Rooms
			sent := fb.counts().unregisters
			beat(t, s, fake) // the kept removal goes again, answered unknown again
			if c := fb.counts(); c.unregisters <= sent {
				t.Fatal("the heartbeat did not send the kept removal again")
			}
			if again := fb.lastUnregister().Rooms; len(again) != 1 || len(first) != 1 || again[0] != first[0] {
				t.Fatalf("retry sent %+v, want the same entry %+v", again, first)
			}
			if n := s.reg.outboxLen(); n != 1 {
				t.Fatalf("outbox holds %d entries after another unknown status, want the removal kept", n)
			}

			answer(confirming)
			beat(t, s, fake)
			if n := s.reg.outboxLen(); n != 0 {
				t.Fatalf("outbox holds %d entries after %q, want it dropped", n, confirming)
			}
			sent = fb.counts().unregisters
			beat(t, s, fake)
			if c := fb.counts(); c.unregisters != sent {
				t.Fatalf("a removal confirmed %q was sent again", confirming)
			}
		})
	}
}
