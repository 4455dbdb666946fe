package wire

import (
	"errors"
	"strings"
	"testing"
)

// Rule: a ?s= hint may carry a session id of MaxSessionIDLen bytes (twice as
// many hex digits), not one byte more.
func TestSessionHintAtItsLimit(t *testing.T) {
	sid := SessionID(strings.Repeat("r", MaxSessionIDLen))
	if got, err := ParseSessionHint(sid.Hint()); err != nil || got != sid {
		t.Fatalf("hint of %d bytes = %d bytes, %v", MaxSessionIDLen, len(got), err)
	}
	long := SessionID(strings.Repeat("r", MaxSessionIDLen+1))
	if _, err := ParseSessionHint(long.Hint()); !errors.Is(err, ErrBadSessionHint) {
		t.Fatalf("hint of %d bytes = %v, want bad_session_hint", MaxSessionIDLen+1, err)
	}
}
