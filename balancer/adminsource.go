package balancer

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/purrfly/purrfly/wire"
)

// maxForwardedForLen bounds the X-Forwarded-For header read.
const maxForwardedForLen = 1024

// adminSource is the source address of a /v1 request, for the failed-auth
// throttle and the audit log: Options.ClientIPHeader (Fly-Client-IP on
// Fly) when present, else X-Forwarded-For's first hop when
// Options.TrustProxy, else the TCP peer.
func (s *Server) adminSource(r *http.Request) string {
	if h := s.opts.ClientIPHeader; h != "" {
		if ip, ok := parseAddr(r.Header.Get(h)); ok {
			return ip
		}
	}
	if s.opts.TrustProxy {
		if ip, ok := firstForwardedHop(r.Header.Get("X-Forwarded-For")); ok {
			return ip
		}
	}
	return wire.ClientIP(r, "")
}

// firstForwardedHop is the client address of an X-Forwarded-For value
// ("client, proxy1, proxy2"), normalized; false when it is missing, too
// long or not an address.
func firstForwardedHop(v string) (string, bool) {
	if v == "" || len(v) > maxForwardedForLen {
		return "", false
	}
	first, _, _ := strings.Cut(v, ",")
	return parseAddr(first)
}

// parseAddr reads an IP address, with or without a port ("1.2.3.4",
// "1.2.3.4:5", "[::1]:5", "::1"), as its canonical text.
func parseAddr(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return "", false
	}
	if a, err := netip.ParseAddr(v); err == nil {
		return a.Unmap().WithZone("").String(), true
	}
	if host, _, err := net.SplitHostPort(v); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap().WithZone("").String(), true
		}
	}
	return "", false
}
