package wire

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// Rule: ClientIP is the named header's trimmed value when it is set and at
// most 64 bytes, otherwise the TCP peer's host (or RemoteAddr as it is when
// it has no port); with no header name the header is ignored.
func TestClientIP(t *testing.T) {
	for _, c := range []struct {
		name, header, value, remote, want string
	}{
		{"header", HeaderFlyClientIP, " 203.0.113.7 ", "10.0.0.1:1234", "203.0.113.7"},
		{"header at 64 bytes", HeaderFlyClientIP, strings.Repeat("a", 64), "10.0.0.1:1234", strings.Repeat("a", 64)},
		{"header past 64 bytes", HeaderFlyClientIP, strings.Repeat("a", 65), "10.0.0.1:1234", "10.0.0.1"},
		{"blank header", HeaderFlyClientIP, "  ", "10.0.0.1:1234", "10.0.0.1"},
		{"no header name", "", "203.0.113.7", "[::1]:1234", "::1"},
		{"no port", HeaderFlyClientIP, "", "10.0.0.1", "10.0.0.1"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if c.value != "" {
			r.Header.Set(HeaderFlyClientIP, c.value)
		}
		if got := ClientIP(r, c.header); got != c.want {
			t.Errorf("%s: ClientIP = %q, want %q", c.name, got, c.want)
		}
	}
}
