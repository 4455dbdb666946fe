package wire

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Rule: a preflight's Access-Control-Request-Headers is echoed while it is
// at most MaxHeaderValueLen bytes; a longer one is answered with "*".
func TestPreflightEchoesRequestHeadersUpToTheLimit(t *testing.T) {
	h := Common(http.NotFoundHandler())
	for _, n := range []int{MaxHeaderValueLen, MaxHeaderValueLen + 1} {
		asked := strings.Repeat("h", n)
		req := httptest.NewRequest(http.MethodOptions, "/join", nil)
		req.Header.Set("Access-Control-Request-Headers", asked)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		want := asked
		if n > MaxHeaderValueLen {
			want = "*"
		}
		if got := rec.Header().Get("Access-Control-Allow-Headers"); got != want {
			t.Errorf("%d-byte request headers: allowed %.20q..., want %.20q...", n, got, want)
		}
	}
}
