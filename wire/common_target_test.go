package wire

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Rule: Common passes clean absolute paths through, a trailing slash and
// the root included, and answers every other target itself in JSON
// (bad_path; CONNECT is method_not_allowed).
func TestCommonServesCleanPathsOnly(t *testing.T) {
	h := Common(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	for _, c := range []struct {
		method, target string
		status         int
		code           string
	}{
		{http.MethodGet, "/", http.StatusTeapot, ""},
		{http.MethodGet, "/list", http.StatusTeapot, ""},
		{http.MethodGet, "/rooms/", http.StatusTeapot, ""},
		{http.MethodGet, "/a/../list", http.StatusBadRequest, ErrBadPath.Code},
		{http.MethodGet, "//list", http.StatusBadRequest, ErrBadPath.Code},
		{http.MethodGet, "/list//", http.StatusBadRequest, ErrBadPath.Code},
		{http.MethodGet, "*", http.StatusBadRequest, ErrBadPath.Code},
		{http.MethodConnect, "/list", http.StatusMethodNotAllowed, ErrMethodNotAllowed.Code},
	} {
		req := httptest.NewRequest(c.method, "/", nil)
		req.URL.Path, req.RequestURI = c.target, c.target
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("%s %s: status %d, want %d", c.method, c.target, rec.Code, c.status)
			continue
		}
		if c.code == "" {
			continue
		}
		var body Error
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code != c.code {
			t.Errorf("%s %s: body %q (%v), want code %s", c.method, c.target, rec.Body, err, c.code)
		}
	}
}
