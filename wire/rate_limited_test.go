package wire

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"
)

// Rule: RateLimited answers rate_limited with Retry-After the wait rounded
// up to whole seconds, at least 1.
func TestRateLimitedRetryAfter(t *testing.T) {
	for wait, want := range map[time.Duration]string{
		0: "1", -time.Second: "1", time.Nanosecond: "1", time.Second: "1",
		time.Second + time.Nanosecond: "2", 2500 * time.Millisecond: "3", 10 * time.Second: "10",
	} {
		rec := httptest.NewRecorder()
		err := RateLimited(rec, wait)
		if !errors.Is(err, ErrRateLimited) {
			t.Errorf("RateLimited(%v) = %v, want rate_limited", wait, err)
		}
		if got := rec.Header().Get("Retry-After"); got != want {
			t.Errorf("RateLimited(%v): Retry-After %q, want %q", wait, got, want)
		}
	}
}
