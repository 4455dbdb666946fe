// Package testutil holds the small helpers that many test packages share:
// a bounded wait for a condition, random hex identifiers, and HTTP clients
// from chosen loopback sources with a counter of concurrent answers
// (loopback.go), and a buffer safe for a writer and a reader (buffer.go).
// It is for
// tests only (like internal/testbin): no production package imports it.
package testutil

import (
	"github.com/purrfly/purrfly/internal/randid"

	"testing"
	"time"
)

// PollInterval is how long Eventually and Poll sleep between two checks of
// the condition.
const PollInterval = 10 * time.Millisecond

// Poll checks cond every PollInterval until it holds, and reports whether
// it did before timeout passed. cond is checked at least once, and once
// more after the deadline, so a condition that comes true during the last
// sleep still counts.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout) // wall clock: bounds a wait for other goroutines
	for !cond() {
		if time.Now().After(deadline) { // wall clock: bounds a wait for other goroutines
			return false
		}
		time.Sleep(PollInterval) // wall clock: polls state other goroutines change
	}
	return true
}

// Eventually waits as Poll does and fails the test, naming what it waited
// for and for how long, when cond does not hold before timeout.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Poll(timeout, cond) {
		tb.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// RandomHex returns 2n hex digits from n bytes of crypto/rand, for ids
// that must not collide between tests (or runs) sharing a machine.
func RandomHex(n int) string { return randid.Hex(n) }
