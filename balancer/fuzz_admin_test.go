package balancer

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// FuzzParseBearer: whatever the Authorization header, a token comes back
// only from a "Bearer " header and is a valid secret that the header ends
// with.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"", "Bearer x", "bearer   abc", "Bearer", "Basic abc", "Bearer a b", "BEARER \x00", "Bearer " + strings.Repeat("k", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := parseBearer(h)
		if !ok {
			if tok != "" {
				t.Fatal("a token with !ok")
			}
			return
		}
		if !wire.ValidSecret(tok) || !strings.EqualFold(h[:7], "bearer ") || !strings.HasSuffix(h, tok) || len(h) > maxAuthHeaderLen {
			t.Fatalf("parseBearer(%q) = %q", h, tok)
		}
	})
}

// FuzzParseIfNoneMatch: a parsed header gives at most the tag bound, tags
// without quotes or controls, and the ETag etagOf makes is matched.
func FuzzParseIfNoneMatch(f *testing.F) {
	for _, s := range []string{"*", `"a"`, `W/"a", "b"`, `"a",`, `W/"`, `"a" "b"`, `, "a"`, `"\\"`, strings.Repeat(`"a",`, 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tags, star, ok := parseIfNoneMatch(v)
		if !ok {
			return
		}
		if star && len(tags) > 0 || !star && len(tags) == 0 || len(tags) > maxIfNoneMatchTags {
			t.Fatalf("%q: %v %v", v, tags, star)
		}
		for _, tag := range tags {
			if strings.ContainsAny(tag, "\"\\ \t\r\n") {
				t.Fatalf("%q: tag %q", v, tag)
			}
		}
		// Round trip: the tags joined again parse to the same.
		joined := make([]string, len(tags))
		for i, tag := range tags {
			joined[i] = `W/"` + tag + `"`
		}
		if !star {
			again, _, ok := parseIfNoneMatch(strings.Join(joined, ", "))
			if !ok || len(again) != len(tags) {
				t.Fatalf("%q: round trip %v", v, again)
			}
		}
	})
}

// FuzzForwardedFor: a first hop, when found, is a canonical IP address.
func FuzzForwardedFor(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4, 5.6.7.8", "[::1]:80, x", "::ffff:1.2.3.4", "fe80::1%eth0", "garbage", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ip, ok := firstForwardedHop(v)
		if !ok {
			return
		}
		a, err := netip.ParseAddr(ip)
		if err != nil || a.String() != ip || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("firstForwardedHop(%q) = %q", v, ip)
		}
	})
}
