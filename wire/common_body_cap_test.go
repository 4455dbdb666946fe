package wire

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Rule: behind Common a request body of MaxBodySize bytes reads whole and a
// longer one fails with *http.MaxBytesError.
func TestCommonCapsTheRequestBody(t *testing.T) {
	for _, n := range []int{MaxBodySize, MaxBodySize + 1} {
		var read int
		var readErr error
		h := Common(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var b []byte
			b, readErr = io.ReadAll(r.Body)
			read = len(b)
		}))
		req := httptest.NewRequest(http.MethodPost, "/allocate_ws", bytes.NewReader(make([]byte, n)))
		h.ServeHTTP(httptest.NewRecorder(), req)
		var tooLarge *http.MaxBytesError
		if n <= MaxBodySize && (readErr != nil || read != n) {
			t.Errorf("%d-byte body: read %d, %v; want it whole", n, read, readErr)
		}
		if n > MaxBodySize && !errors.As(readErr, &tooLarge) {
			t.Errorf("%d-byte body: read %d, %v; want *http.MaxBytesError", n, read, readErr)
		}
	}
}
