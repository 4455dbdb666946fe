package randid

import (
	"encoding/hex"
	"testing"
)

func TestHexIsRandomAndOfTheAskedLength(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id := Hex(16)
		if len(id) != 32 || seen[id] {
			t.Fatalf("id %q (seen before: %v)", id, seen[id])
		}
		if _, err := hex.DecodeString(id); err != nil {
			t.Fatalf("id %q is not hex: %v", id, err)
		}
		seen[id] = true
	}
	if Hex(7) == "" || len(Hex(7)) != 14 || Hex(0) != "" {
		t.Error("lengths")
	}
}
