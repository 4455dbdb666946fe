package limit

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// TestSource: the header (Fly-Client-IP) when given, X-Forwarded-For's
// last hop (the one the proxy appended) only with trustProxy, else the TCP
// peer; canonical addresses.
func TestSource(t *testing.T) {
	for _, tc := range []struct {
		flyHeader, trust bool
		hdr              map[string]string
		want             string
	}{
		{false, false, map[string]string{"X-Forwarded-For": "203.0.113.9"}, "127.0.0.1"},
		{false, true, map[string]string{"X-Forwarded-For": "203.0.113.9, 10.0.0.1"}, "10.0.0.1"},
		{false, true, map[string]string{"X-Forwarded-For": "203.0.113.9,10.0.0.1"}, "10.0.0.1"},
		{false, true, map[string]string{"X-Forwarded-For": "10.0.0.1, garbage"}, "127.0.0.1"},
		{false, true, map[string]string{"X-Forwarded-For": "10.0.0.1, "}, "127.0.0.1"},
		{false, true, map[string]string{"X-Forwarded-For": strings.Repeat("203.0.113.9, ", 2000) + "10.0.0.2"}, "10.0.0.2"},
		{false, true, map[string]string{"X-Forwarded-For": "[2001:db8::1]:443"}, "2001:db8::1"},
		{true, true, map[string]string{"Fly-Client-IP": "198.51.100.4", "X-Forwarded-For": "203.0.113.9"}, "198.51.100.4"},
		{true, false, map[string]string{"X-Forwarded-For": "203.0.113.9"}, "127.0.0.1"},
		{true, false, map[string]string{"Fly-Client-IP": "[::ffff:198.51.100.4]:80"}, "198.51.100.4"},
		{true, true, map[string]string{"Fly-Client-IP": "not an address", "X-Forwarded-For": "10.0.0.1"}, "10.0.0.1"},
	} {
		header := ""
		if tc.flyHeader {
			header = "Fly-Client-IP"
		}
		req, _ := http.NewRequest(http.MethodGet, "http://x/v1/stats", nil)
		req.RemoteAddr = "127.0.0.1:5555"
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		if got := Source(req, header, tc.trust); got != tc.want {
			t.Fatalf("%+v: source %q, want %q", tc, got, tc.want)
		}
	}
	// The TCP peer is canonical too: one client, one key.
	req, _ := http.NewRequest(http.MethodGet, "http://x/v1/stats", nil)
	req.RemoteAddr = "[::ffff:192.0.2.7]:5555"
	if got := Source(req, "Fly-Client-IP", false); got != "192.0.2.7" {
		t.Fatalf("an IPv4-mapped peer: source %q, want 192.0.2.7", got)
	}
	// A proxy that adds a line of its own after the client's: its line.
	req, _ = http.NewRequest(http.MethodGet, "http://x/v1/stats", nil)
	req.RemoteAddr = "127.0.0.1:5555"
	req.Header.Add("X-Forwarded-For", "203.0.113.9")
	req.Header.Add("X-Forwarded-For", "10.0.0.3")
	if got := Source(req, "", true); got != "10.0.0.3" {
		t.Fatalf("two X-Forwarded-For lines: source %q, want the last line's 10.0.0.3", got)
	}
}

// FuzzForwardedFor: a last hop, when found, is a canonical IP address,
// and nothing before the last comma of the last line decides it.
func FuzzForwardedFor(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4, 5.6.7.8", "x, [::1]:80", "::ffff:1.2.3.4", "fe80::1%eth0", "garbage", "", "1.2.3.4,"} {
		f.Add(s, "")
	}
	f.Add("203.0.113.9", "10.0.0.1")
	f.Fuzz(func(t *testing.T, v, client string) {
		lines := []string{v}
		if client != "" {
			lines = []string{client, v}
		}
		ip, ok := lastForwardedHop(lines)
		if !ok {
			return
		}
		a, err := netip.ParseAddr(ip)
		if err != nil || a.String() != ip || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("lastForwardedHop(%q) = %q", lines, ip)
		}
		if again, ok2 := lastForwardedHop([]string{"forged, " + v}); !ok2 || again != ip {
			t.Fatalf("a prefix before the last hop changed it: %q -> %q", ip, again)
		}
	})
}
