package balancer

import (
	"net/http"
	"slices"
	"strings"
)

// isAdminPath reports whether p is under /v1.
func isAdminPath(p string) bool { return p == "/v1" || strings.HasPrefix(p, "/v1/") }

// adminPreflight answers CORS preflights of /v1 itself (wire.Common would
// allow every origin): only Options.AdminCORSOrigins get the CORS headers,
// none by default. Everything else goes to next.
func (s *Server) adminPreflight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodOptions || !isAdminPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-store, private")
		h.Set("Pragma", "no-cache") // as wire.Common marks every other answer
		if s.adminCORS(w, r) {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, If-None-Match")
			h.Set("Access-Control-Max-Age", "600")
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// adminCORS replaces wire.Common's allow-all CORS header on a /v1 answer:
// the request's Origin is allowed only when listed. It reports whether it
// was.
func (s *Server) adminCORS(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	h.Del("Access-Control-Allow-Origin")
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" || !slices.Contains(s.opts.AdminCORSOrigins, origin) {
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", "ETag, Retry-After")
	return true
}
