package relay

import (
	"net/http"
	"testing"
)

// A room waiting for its new host stays reserved until that host connects
// or the empty-room timeout ends it, and once the relay has seen its host
// go, the current client credential is all a claim needs. At
// generation 0 the host's crash kicks every client (count 0, phase
// vacant); within the recovery window no allocation under another id
// takes the name, and the players' claim succeeds.
func TestMigrationCrashRecoveryAtGenerationZeroIsReserved(t *testing.T) {
	m := newMigRoom(t, "crash-reserved", Options{})
	m.vacate() // the host crashed with a client there: recovery starts
	if _, status, _ := allocate(t, m.s, m.name, "another-play"); status == http.StatusOK {
		t.Fatal("an allocation replaced a room whose peers are recovering from a host crash")
	}
	if _, e := m.claim("recover", 0, "5", ""); e != nil {
		t.Fatalf("the crash-recovery claim: %v", e)
	}
}

// Every successful claim gives the room a new host credential, and while
// the relay still has a live host a claim also needs a one-use grant that
// host made. The exact allocation replay (same
// allocation_id, which the balancer forwards to the relay) answers
// r.hostSecret, which after a claim is the PROMOTED host's credential. The
// original allocator - after the migration just a holder of the client
// credential - replays its allocation, gets the live promoted host's
// credential, authorizes a grant for itself and seizes the live host.
func TestMigrationAllocationReplayDoesNotLeakThePromotedHostCredential(t *testing.T) {
	m := newVacantRoom(t, "replay-leak", Options{})
	c := m.mustClaim("c1", 0, "8", "")
	host := join(t, m.s, m.name, c.Secret) // the promoted host, provisional
	if _, e := m.activate(c); e != nil {
		t.Fatalf("activate: %v", e)
	}
	// The original allocator replays its allocation (same allocation id).
	a, status, e := allocate(t, m.s, m.name, "alloc-"+m.name)
	if status != http.StatusOK {
		t.Fatalf("allocation replay: %d %v", status, e)
	}
	if a.Capability.Secret == c.Secret {
		t.Errorf("the allocation replay answered the promoted host's live credential")
	}
	// What it buys: a grant from "the live host" and a claim that closes it.
	leaked := *m
	leaked.hostSecret = a.Capability.Secret
	g, ge := leaked.authorize("seize", 1, "666")
	if ge != nil {
		return // not exploitable
	}
	if _, ce := m.claim("seize", 1, "666", g.Grant); ce == nil {
		t.Errorf("a client-credential holder seized the live promoted host through the replayed allocation")
		_ = host
	}
}
