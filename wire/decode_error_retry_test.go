package wire

import "testing"

// Rule: an answer that is not a purrfly error is retryable exactly when its
// status is a server error (5xx, 500 included) or 429 Too Many Requests.
func TestDecodeErrorRetryableByStatus(t *testing.T) {
	for status, want := range map[int]bool{
		400: false, 404: false, 428: false, 429: true, 430: false, 499: false,
		500: true, 502: true, 503: true,
	} {
		if got := DecodeError(status, []byte("<html>")).Retryable; got != want {
			t.Errorf("DecodeError(%d, non-json).Retryable = %v, want %v", status, got, want)
		}
	}
}
