package limit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Source is the source address of a request, the key of its failed-auth
// throttle (and the name the logs give it): header's value (Fly-Client-IP
// on Fly, where Fly's proxy sets it; "": none) when present and an
// address, else X-Forwarded-For's last hop when trustProxy, else the TCP
// peer. Addresses are canonical (no port, no zone, IPv4 not mapped), so
// one client cannot spell itself several ways.
//
// The last hop, not the first: a proxy (nginx, Caddy, Traefik, Go's
// ReverseProxy) appends the address it saw to whatever X-Forwarded-For the
// client sent, so everything before the last hop is the client's to write
// and would let each request claim a fresh address (escaping the
// throttle) or another's (forging the audit log).
func Source(r *http.Request, header string, trustProxy bool) string {
	if header != "" {
		if ip, ok := parseAddr(r.Header.Get(header)); ok {
			return ip
		}
	}
	if trustProxy {
		if ip, ok := lastForwardedHop(r.Header.Values("X-Forwarded-For")); ok {
			return ip
		}
	}
	if ip, ok := parseAddr(r.RemoteAddr); ok {
		return ip
	}
	return r.RemoteAddr
}

// lastForwardedHop is the address the nearest proxy appended to
// X-Forwarded-For ("client, proxy1, <peer of the last proxy>"): the last
// hop of the last header line (a proxy that adds a line of its own
// instead of extending the client's adds it last), normalized; false when
// it is missing or not an address. Only the last hop is read, so the
// client's part costs nothing however long it is (the services bound the
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
