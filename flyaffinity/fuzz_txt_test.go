package flyaffinity

import (
	"strings"
	"testing"
)

// FuzzParseMachines: the TXT value of vms.<app>.internal, "<id> <region>,..."
// (several records given as NUL-separated values). Every id returned is a
// valid token (1 to 64 letters, digits or '-') taken from the first field
// of an entry, at most maxMachines of them, and every non-empty entry is
// either returned or counted as skipped.
func FuzzParseMachines(f *testing.F) {
	for _, s := range []string{
		"148e21dad76789 sea,4d89699c030518 ams",
		" 148e21dad76789  sea , 4d89699c030518 ams ,",
		"a1 sea\x00b2 ams", "a1,b2 ams", "a1 sea extra,b2 ams", "a_1 sea,b2 am$,c3 fra",
		strings.Repeat("a", 65) + " sea,b2 ams", "garbage", "", ",,,", "a\tb,c\u00a0d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		values := strings.Split(in, "\x00")
		ids, skipped := parseMachines(values)
		if len(ids) > maxMachines || skipped < 0 {
			t.Fatalf("%d ids, %d skipped", len(ids), skipped)
		}
		entries := 0
		firsts := map[string]bool{}
		for _, v := range values {
			if len(v) > maxTXTLength {
				entries++ // the whole value is skipped
				continue
			}
			for e := range strings.SplitSeq(v, ",") {
				if f := strings.Fields(e); len(f) > 0 {
					entries++
					firsts[f[0]] = true
				}
			}
		}
		if len(ids)+skipped != entries {
			t.Fatalf("%q: %d ids + %d skipped != %d entries", in, len(ids), skipped, entries)
		}
		for _, id := range ids {
			if !validToken(id) || !firsts[id] {
				t.Fatalf("%q: returned %q", in, id)
			}
		}
	})
}
