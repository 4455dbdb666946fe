package flyaffinity

import (
	"fmt"
	"strings"
	"testing"
)

// Rule: a joined TXT value of exactly maxTXTLength bytes is parsed; a longer
// one is skipped whole (one skipped entry).
func TestTXTValueAtItsLimit(t *testing.T) {
	entry := "a1 sea"
	at := entry + strings.Repeat(",", maxTXTLength-len(entry)) // trailing commas are ignored silently
	if ids, skipped := parseMachines([]string{at}); len(ids) != 1 || ids[0] != "a1" || skipped != 0 {
		t.Fatalf("value of %d bytes: %q, %d skipped; want [a1], 0", len(at), ids, skipped)
	}
	if ids, skipped := parseMachines([]string{at + ","}); len(ids) != 0 || skipped != 1 {
		t.Fatalf("value of %d bytes: %q, %d skipped; want none, 1", len(at)+1, ids, skipped)
	}
}

// Rule: one answer yields at most maxMachines machines; the entries past
// them are skipped and counted.
func TestMachinesPerAnswerAtTheLimit(t *testing.T) {
	entries := make([]string, maxMachines+1)
	for i := range entries {
		entries[i] = fmt.Sprintf("m%d sea", i)
	}
	if ids, skipped := parseMachines([]string{strings.Join(entries[:maxMachines], ",")}); len(ids) != maxMachines || skipped != 0 {
		t.Fatalf("%d entries: %d machines, %d skipped; want %d, 0", maxMachines, len(ids), skipped, maxMachines)
	}
	ids, skipped := parseMachines([]string{strings.Join(entries, ",")})
	if len(ids) != maxMachines || skipped != 1 || ids[maxMachines-1] != fmt.Sprintf("m%d", maxMachines-1) {
		t.Fatalf("%d entries: %d machines, %d skipped; want the first %d, 1 skipped", maxMachines+1, len(ids), skipped, maxMachines)
	}
}
