package core

import (
	"strings"
	"testing"

	"github.com/purrfly/purrfly/relay/internal/core/phase"
)

// TestRefusedPhaseIsReported: a room transition from a phase it may not
// start from (an activation of a room nobody claimed) changes nothing,
// and the core's consistency check, which every test of a started relay
// runs at its end, reports it.
func TestRefusedPhaseIsReported(t *testing.T) {
	c := testCore(t, nil)
	if _, err := c.Allocate("never-claimed", "id"); err != nil {
		t.Fatal(err)
	}
	if err := c.ConsistencyCheck(); err != nil {
		t.Fatalf("a fresh core: %v", err)
	}
	r := c.rooms.get("never-claimed")
	r.mu.Lock()
	moved := r.activatedLocked()
	p := r.phaseLocked()
	r.mu.Unlock()
	if moved || p != phase.Awaiting {
		t.Fatalf("activation of an awaiting room: moved %v, now %v", moved, p)
	}
	err := c.ConsistencyCheck()
	if err == nil || !strings.Contains(err.Error(), "Activated refused in phase awaiting") {
		t.Fatalf("consistency check: %v", err)
	}
}
