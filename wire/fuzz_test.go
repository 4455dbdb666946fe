package wire

import (
	"net/http"
	"strconv"
	"testing"
)

// promoted_player_id and expected_generation come from the network: the
// parser never panics, and what it accepts is exactly the canonical
// decimal of a nonzero uint64.
func FuzzParsePlayerID(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "+5", " 5", "05", "18446744073709551615", "18446744073709551616", "٥"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParsePlayerID(s)
		n, perr := strconv.ParseUint(s, 10, 64)
		canonical := perr == nil && n != 0 && strconv.FormatUint(n, 10) == s
		if (err == nil) != canonical || err == nil && got != s {
			t.Fatalf("ParsePlayerID(%q) = %q, %v; canonical %v", s, got, err, canonical)
		}
	})
}

// A migration call's headers, whatever they hold, parse or fail cleanly.
func FuzzParseMigrationRequest(f *testing.F) {
	f.Add("room", "secret", "claim", "inc", "0", "5", "grant")
	f.Add("", "s", "c", "i", "-1", "05", "")
	f.Fuzz(func(t *testing.T, name, secret, claim, inc, gen, promoted, grant string) {
		r := &http.Request{Header: http.Header{}}
		for k, v := range map[string]string{HeaderName: name, HeaderMigrationSecret: secret, HeaderMigrationClaimID: claim,
			HeaderIncarnation: inc, HeaderExpectedGen: gen, HeaderPromotedPlayerID: promoted, HeaderMigrationGrant: grant} {
			r.Header.Set(k, v)
		}
		for _, op := range []MigrationOp{OpCurrent, OpAuthorize, OpClaim, OpActivate} {
			m, err := ParseMigrationRequest(r, op)
			if err != nil {
				if _, ok := err.(*Error); !ok {
					t.Fatalf("%s: a non-wire error %v", op, err)
				}
				continue
			}
			if m.Name != name || len(m.Secret) > MaxSecretLen || op != OpCurrent && m.PromotedPlayerID != promoted {
				t.Fatalf("%s: parsed %+v from name %q promoted %q", op, m, name, promoted)
			}
		}
	})
}
