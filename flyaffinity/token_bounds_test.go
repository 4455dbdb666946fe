package flyaffinity

import (
	"strings"
	"testing"
)

// Rule: a machine id or region is 1 to maxTokenLen bytes of ASCII letters,
// digits and '-': every letter and digit counts, the characters next to
// them in ASCII do not.
func TestValidTokenBounds(t *testing.T) {
	for _, s := range []string{"a", "z", "A", "Z", "0", "9", "-", "azAZ09-", strings.Repeat("a", maxTokenLen)} {
		if !validToken(s) {
			t.Errorf("validToken(%.20q) = false, want true", s)
		}
	}
	for _, s := range []string{"", "`", "{", "@", "[", "/", ":", "_", " ", "é", strings.Repeat("a", maxTokenLen+1)} {
		if validToken(s) {
			t.Errorf("validToken(%.20q) = true, want false", s)
		}
	}
}
