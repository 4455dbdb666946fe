package testutil

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	if !Poll(5*time.Second, func() bool { return n.Add(1) == 3 }) {
		t.Fatal("Poll gave up on a condition that held at the third check")
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("cond checked %d times, want 3", got)
	}
}

func TestPollGivesUpAfterTheTimeout(t *testing.T) {
	start := time.Now()
	if Poll(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 5*time.Second {
		t.Fatalf("Poll gave up after %v, want about 30ms", d)
	}
}

// fatalRecorder records Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestEventuallyNamesWhatItWaitedFor(t *testing.T) {
	f := &fatalRecorder{TB: t}
	Eventually(f, 20*time.Millisecond, "the moon", func() bool { return false })
	if !strings.Contains(f.msg, "the moon") || !strings.Contains(f.msg, "20ms") {
		t.Fatalf("failure %q does not name what was awaited and the timeout", f.msg)
	}
	f.msg = ""
	Eventually(f, time.Second, "the sun", func() bool { return true })
	if f.msg != "" {
		t.Fatalf("Eventually failed on a condition that held: %q", f.msg)
	}
}

func TestRandomHex(t *testing.T) {
	a, b := RandomHex(8), RandomHex(8)
	if len(a) != 16 || strings.Trim(a, "0123456789abcdef") != "" {
		t.Fatalf("RandomHex(8) = %q, want 16 hex digits", a)
	}
	if a == b {
		t.Fatalf("two RandomHex(8) calls both gave %q", a)
	}
}
