//go:build !linux

package e2e

import "testing"

// testGeneratedAdminKey needs a pseudo-terminal set up as Linux does
// (adminkey_linux_test.go); elsewhere it is skipped.
func testGeneratedAdminKey(t *testing.T, _ string) {
	t.Skip("the controlling-terminal check runs on Linux only")
}
