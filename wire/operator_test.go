package wire

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPrivateOrWithOperator: /metrics is open to the private network and to
// local runs, but a request through Fly's public proxy (Fly-Client-IP)
// needs the operator's secret, and a refusal does not echo it.
func TestPrivateOrWithOperator(t *testing.T) {
	const secret = "s3cret-value"
	operator := func(_ http.ResponseWriter, r *http.Request) error { return CheckOperator(r, secret) }
	h := PrivateOr(operator, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "metrics")
	}))
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"private network", nil, http.StatusOK},
		{"public, no credential", map[string]string{HeaderFlyClientIP: "203.0.113.7"}, http.StatusUnauthorized},
		{"public, wrong bearer", map[string]string{HeaderFlyClientIP: "203.0.113.7", "Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"public, bearer", map[string]string{HeaderFlyClientIP: "203.0.113.7", "Authorization": "bearer " + secret}, http.StatusOK},
		{"public, only the forwarded port", map[string]string{HeaderFlyForwardedPort: "443"}, http.StatusUnauthorized},
		{"public, internal header", map[string]string{HeaderFlyClientIP: "203.0.113.7", HeaderInternalSecret: secret}, http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, rec.Code, tc.status)
		}
		if body := rec.Body.String(); tc.status != http.StatusOK && (strings.Contains(body, secret) || !strings.Contains(body, `"code":"unauthorized"`)) {
			t.Errorf("%s: refusal body %q", tc.name, body)
		}
	}
}

// TestPrivateOr: the given check decides only requests from the internet
// (Fly-Client-IP or Fly-Forwarded-Port), and its error, headers included,
// is the answer.
func TestPrivateOr(t *testing.T) {
	checked := 0
	h := PrivateOr(func(w http.ResponseWriter, r *http.Request) error {
		checked++
		return RateLimited(w, 3*time.Second)
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "metrics") }))
	for _, tc := range []struct {
		hdr     map[string]string
		status  int
		checked int
	}{
		{nil, http.StatusOK, 0},
		{map[string]string{HeaderFlyClientIP: "203.0.113.7"}, http.StatusTooManyRequests, 1},
		{map[string]string{HeaderFlyForwardedPort: "443"}, http.StatusTooManyRequests, 2},
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status || checked != tc.checked {
			t.Fatalf("%v: %d after %d checks, want %d after %d", tc.hdr, rec.Code, checked, tc.status, tc.checked)
		}
		if tc.status != http.StatusOK && rec.Header().Get("Retry-After") != "3" {
			t.Fatalf("%v: Retry-After %q, want the check's 3", tc.hdr, rec.Header().Get("Retry-After"))
		}
	}
}
