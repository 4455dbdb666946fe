package wire

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// migrationRequest is a request carrying m's headers.
func migrationRequest(t *testing.T, m MigrationRequest) *http.Request {
	t.Helper()
	r, err := http.NewRequest(m.Op.Method(), m.Op.PublicPath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetHeaders(r.Header)
	return r
}

// Rule: a claim's optional migration_grant may be MaxGrantLen bytes and an
// activation's fencing_token MaxFenceLen bytes; one byte more, or a control
// character, is a bad_header, never a parsed request.
func TestMigrationGrantAndFenceAtTheirLimits(t *testing.T) {
	base := MigrationRequest{Name: "room", Secret: "s", ClaimID: "c", Incarnation: "i", ExpectedGeneration: 1, PromotedPlayerID: "9"}
	for _, c := range []struct {
		name  string
		op    MigrationOp
		value string
		ok    bool
	}{
		{"grant at the limit", OpClaim, strings.Repeat("g", MaxGrantLen), true},
		{"grant past the limit", OpClaim, strings.Repeat("g", MaxGrantLen+1), false},
		{"grant with a control character", OpClaim, "g\x01", false},
		{"fence at the limit", OpActivate, strings.Repeat("f", MaxFenceLen), true},
		{"fence past the limit", OpActivate, strings.Repeat("f", MaxFenceLen+1), false},
		{"fence with a control character", OpActivate, "f\x01", false},
	} {
		m := base
		m.Op = c.op
		if c.op == OpClaim {
			m.Grant = c.value
		} else {
			m.FencingToken = c.value
		}
		got, err := ParseMigrationRequest(migrationRequest(t, m), c.op)
		switch {
		case c.ok && (err != nil || got != m):
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, m)
		case !c.ok && !errors.Is(err, ErrBadHeader):
			t.Errorf("%s: %v, want bad_header", c.name, err)
		}
	}
}

// Rule: a promoted_player_id that is present but not the canonical decimal
// of a nonzero uint64 is invalid_promoted_player_id whatever its length:
// 21 digits or more (past any uint64) were a bad_header, so a caller could
// not tell a wrong id from a malformed request. Missing, it is named as
// missing.
func TestPromotedPlayerIDPastTwentyDigits(t *testing.T) {
	for _, op := range []MigrationOp{OpAuthorize, OpClaim, OpActivate} {
		for _, id := range []string{strings.Repeat("1", 21), strings.Repeat("9", 300), "1\x01"} {
			m := MigrationRequest{Op: op, Name: "room", Secret: "s", ClaimID: "c", Incarnation: "i", ExpectedGeneration: 1,
				PromotedPlayerID: id, FencingToken: "f"}
			_, err := ParseMigrationRequest(migrationRequest(t, m), op)
			if !errors.Is(err, ErrBadPlayerID) {
				t.Errorf("%s with a %d-byte promoted_player_id: %v, want %s", op, len(id), err, ErrBadPlayerID.Code)
			}
		}
		m := MigrationRequest{Op: op, Name: "room", Secret: "s", ClaimID: "c", Incarnation: "i", ExpectedGeneration: 1, FencingToken: "f"}
		if _, err := ParseMigrationRequest(migrationRequest(t, m), op); !errors.Is(err, ErrMissingHeader) {
			t.Errorf("%s without promoted_player_id: %v, want missing_header", op, err)
		}
	}
}
