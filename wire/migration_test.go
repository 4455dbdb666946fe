package wire

import (
	"net/http"
	"testing"
)

// promoted_player_id is a PurrNet player id in its one spelling: a nonzero
// unsigned 64-bit number in plain decimal, no sign, spaces or leading
// zeros.
func TestParsePlayerID(t *testing.T) {
	for _, bad := range []string{"", "0", "-1", "+5", " 5", "5 ", "05", "00", "18446744073709551616",
		"99999999999999999999", "1e3", "0x5", "5.0", "٥", "1_000"} {
		if _, err := ParsePlayerID(bad); err != ErrBadPlayerID {
			t.Errorf("ParsePlayerID(%q) = %v, want %v", bad, err, ErrBadPlayerID)
		}
	}
	for _, good := range []string{"1", "5", "10", "76561198000000000", "18446744073709551615"} {
		if got, err := ParsePlayerID(good); err != nil || got != good {
			t.Errorf("ParsePlayerID(%q) = %q, %v", good, got, err)
		}
	}
}

// Every call's headers survive SetHeaders and ParseMigrationRequest, and a
// missing one is named.
func TestMigrationRequestHeaders(t *testing.T) {
	for _, op := range []MigrationOp{OpCurrent, OpAuthorize, OpClaim, OpActivate} {
		want := MigrationRequest{Op: op, Name: "room", Secret: "s"}
		if op != OpCurrent {
			want.ClaimID, want.Incarnation, want.ExpectedGeneration, want.PromotedPlayerID = "c", "i", 3, "9"
		}
		if op == OpClaim {
			want.Grant = "g"
		}
		if op == OpActivate {
			want.FencingToken = "f"
		}
		r, _ := http.NewRequest(op.Method(), op.PublicPath(), nil)
		want.SetHeaders(r.Header)
		if got, err := ParseMigrationRequest(r, op); err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", op, got, err, want)
		}
		r.Header.Del(HeaderMigrationSecret)
		if _, err := ParseMigrationRequest(r, op); err == nil || err.(*Error).Code != ErrMissingHeader.Code {
			t.Errorf("%s without a secret: %v", op, err)
		}
	}
	r, _ := http.NewRequest(http.MethodPost, PathMigrationClaim, nil)
	MigrationRequest{Op: OpClaim, Name: "room", Secret: "s", ClaimID: "c", Incarnation: "i", PromotedPlayerID: "9"}.SetHeaders(r.Header)
	for _, gen := range []string{"-1", "01", "x", "18446744073709551616"} {
		r.Header.Set(HeaderExpectedGen, gen)
		if _, err := ParseMigrationRequest(r, OpClaim); err == nil || err.(*Error).Code != ErrBadHeader.Code {
			t.Errorf("expected_generation %q: %v", gen, err)
		}
	}
}

// A header value may hold spaces and UTF-8 (a room name is the game's),
// never a control character.
func TestHeaderValueRefusesControlCharacters(t *testing.T) {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	for v, ok := range map[string]bool{"Lobby 1": true, "Sala ñ": true, "tab\there": false, "del\x7f": false} {
		r.Header.Set(HeaderName, v)
		_, err := HeaderValue(r, HeaderName, MaxSessionIDLen)
		if (err == nil) != ok {
			t.Errorf("HeaderValue(%q) = %v, want ok %v", v, err, ok)
		}
	}
}
