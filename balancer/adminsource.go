package balancer

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/purrfly/purrfly/wire"
)

// adminSource is the source address of a /v1 request (for its failed-auth
// throttle and the audit log) and of a call made with the SECRET (for
// its throttle, secretGuard): Options.ClientIPHeader (Fly-Client-IP on
// Fly) when present, else X-Forwarded-For's last hop when
// Options.TrustProxy, else the TCP peer.
//
// The last hop, not the first: a proxy (nginx, Caddy, Traefik, Go's
// ReverseProxy) appends the address it saw to whatever X-Forwarded-For the
// client sent, so everything before the last hop is the client's to write
// and would let each request claim a fresh address (escaping the
// throttle) or another's (forging the audit log).
func (s *Server) adminSource(r *http.Request) string {
	if h := s.opts.ClientIPHeader; h != "" {
		if ip, ok := parseAddr(r.Header.Get(h)); ok {
			return ip
		}
	}
	if s.opts.TrustProxy {
		if ip, ok := lastForwardedHop(r.Header.Values("X-Forwarded-For")); ok {
			return ip
		}
	}
	return wire.ClientIP(r, "")
}

// lastForwardedHop is the address the nearest proxy appended to
// X-Forwarded-For ("client, proxy1, <peer of the last proxy>"): the last
// hop of the last header line (a proxy that adds a line of its own
// instead of extending the client's adds it last), normalized; false when
// it is missing or not an address. Only the last hop is read, so the
// client's part costs nothing however long it is (wire.Common bounds the
// whole header block).
func lastForwardedHop(lines []string) (string, bool) {
	if len(lines) == 0 {
		return "", false
	}
	v := lines[len(lines)-1]
	return parseAddr(v[strings.LastIndexByte(v, ',')+1:])
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
