package wire

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// Common's header values are shared by every answer: a handler that adds
// to or replaces one changes its own answer only.
func TestCommonSharedValuesStayPut(t *testing.T) {
	h := Common(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/change" {
			w.Header().Add("Cache-Control", "max-age=0")
			w.Header().Set("Pragma", "other")
			w.Header().Add("Access-Control-Allow-Origin", "https://example.com")
		}
		WriteJSON(w, http.StatusOK, struct{}{})
	}))
	get := func(path string) http.Header {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Header()
	}
	if c := get("/change"); !slices.Equal(c["Cache-Control"], []string{"no-store, private", "max-age=0"}) || c.Get("Pragma") != "other" {
		t.Fatalf("changed answer: %v", c)
	}
	want := map[string]string{"Cache-Control": "no-store, private", "Pragma": "no-cache", "Access-Control-Allow-Origin": "*", "Content-Type": "application/json"}
	for i := range 2 {
		got := get("/plain")
		for k, v := range want {
			if !slices.Equal(got[k], []string{v}) {
				t.Errorf("answer %d after a changed one: %s = %q, want %q", i, k, got[k], v)
			}
		}
	}
}
