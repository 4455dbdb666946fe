package wire

import (
	"errors"
	"testing"
)

// Rule: expected_generation is a canonical decimal that may be zero (a
// room's first generation), so "0" is accepted while "00" and "01" are not;
// a promoted_player_id is never zero.
func TestExpectedGenerationMayBeZero(t *testing.T) {
	m := MigrationRequest{Op: OpClaim, Name: "room", Secret: "s", ClaimID: "c", Incarnation: "i", PromotedPlayerID: "9"}
	r := migrationRequest(t, m)
	if got, err := ParseMigrationRequest(r, OpClaim); err != nil || got.ExpectedGeneration != 0 {
		t.Fatalf("expected_generation 0: %+v, %v; want accepted", got, err)
	}
	for _, gen := range []string{"00", "01"} {
		r.Header.Set(HeaderExpectedGen, gen)
		if _, err := ParseMigrationRequest(r, OpClaim); !errors.Is(err, ErrBadHeader) {
			t.Errorf("expected_generation %q: %v, want bad_header", gen, err)
		}
	}
	if _, err := ParsePlayerID("0"); !errors.Is(err, ErrBadPlayerID) {
		t.Errorf("promoted_player_id 0: %v, want %v", err, ErrBadPlayerID)
	}
}
