package wire

import (
	"maps"
	"testing"
)

// RELAY_LABELS and the labels query parameter come from operators and
// callers: the parser never panics, what it accepts is valid and bounded,
// and its canonical form reads back to the same labels.
func FuzzParseLabels(f *testing.F) {
	for _, s := range []string{"", "tier=pro", "a=b,c=d", " a=b , c=d ", "a=b,", "=", "a==b", "a=b,a=c", "é=x", "a:b", "a=b\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, sep := range []byte{'=', ':'} {
			got, err := parseLabels(s, sep)
			if err != nil {
				if got != nil {
					t.Fatalf("parseLabels(%q) failed with labels %v", s, got)
				}
				continue
			}
			if len(got) > MaxLabels {
				t.Fatalf("parseLabels(%q): %d labels", s, len(got))
			}
			if err := ValidateLabels(got); err != nil {
				t.Fatalf("parseLabels(%q) accepted invalid labels %v: %v", s, got, err)
			}
			back, err := parseLabels(FormatLabels(got, sep), sep)
			if err != nil || !maps.Equal(back, got) && len(got) > 0 {
				t.Fatalf("parseLabels(%q) = %v; its canonical form reads back %v, %v", s, got, back, err)
			}
		}
	})
}
