package relay

import (
	"strings"
	"testing"

	"github.com/purrfly/purrfly/relay/internal/core/phase"
)

// TestRefusedPhaseIsReported: a room transition from a phase it may not
// start from (an activation of a room nobody claimed) changes nothing,
// and the relay's consistency check, which every test of a started relay
// runs at its end, reports it.
func TestRefusedPhaseIsReported(t *testing.T) {
	s, err := New(Options{Secret: testSecret, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.core.allocate("never-claimed", "id"); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsistencyCheck(); err != nil {
		t.Fatalf("a fresh relay: %v", err)
	}
	r := s.core.rooms.get("never-claimed")
	r.mu.Lock()
	moved := r.activatedLocked()
	p := r.phaseLocked()
	r.mu.Unlock()
	if moved || p != phase.Awaiting {
		t.Fatalf("activation of an awaiting room: moved %v, now %v", moved, p)
	}
	err = s.ConsistencyCheck()
	if err == nil || !strings.Contains(err.Error(), "Activated refused in phase awaiting") {
		t.Fatalf("consistency check: %v", err)
	}
}
