package wire

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzHeaderValue: HeaderValue and OptionalHeader, which read every header
// the relay and the balancer take from a request (room name, region,
// allocation id, migration fields, route snapshot). What they accept obeys
// the documented charset and limit (valid UTF-8 without a control
// character, tab included, at most max bytes; HeaderValue never answers
// ""); what they refuse is a *Error with code missing_header or
// bad_header.
func FuzzHeaderValue(f *testing.F) {
	for _, s := range []string{"My Room", "eu", "0123456789abcdef", "", " ", "a\tb", "\x7f", "é🙂", strings.Repeat("x", 129), " padded ", "\x91", "caf\xc3"} {
		f.Add(s, uint8(128))
	}
	f.Add("x", uint8(0))
	f.Fuzz(func(t *testing.T, v string, max uint8) {
		r := &http.Request{Header: http.Header{}}
		r.Header["Name"] = []string{v}
		check := func(fn string, got string, err error, wantTrim bool) {
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Code != ErrBadHeader.Code && e.Code != ErrMissingHeader.Code {
					t.Fatalf("%s(%q): %v", fn, v, err)
				}
				return
			}
			if len(v) > int(max) || !utf8.ValidString(v) {
				t.Fatalf("%s accepted %d bytes over %d", fn, len(v), max)
			}
			for i := 0; i < len(v); i++ {
				if v[i] < ' ' || v[i] == 0x7f {
					t.Fatalf("%s accepted control byte %#x in %q", fn, v[i], v)
				}
			}
			if want := v; wantTrim && got != strings.TrimSpace(want) || !wantTrim && got != want {
				t.Fatalf("%s(%q) = %q", fn, v, got)
			}
		}
		got, err := HeaderValue(r, "name", int(max))
		if err == nil && got == "" {
			t.Fatalf("HeaderValue accepted an empty value")
		}
		check("HeaderValue", got, err, false)
		got, err = OptionalHeader(r, "name", int(max))
		check("OptionalHeader", got, err, true)
	})
}

// FuzzParseSessionHint: the ?s= routing hint of every WebSocket upgrade
// and allocation. What it accepts is at most MaxSessionIDLen bytes and its
// own Hint is the input (in lower case); what it refuses is
// ErrBadSessionHint.
func FuzzParseSessionHint(f *testing.F) {
	for _, s := range []string{"", "726f6f6d2f31", SessionID("My Room").Hint(), "ABCDEF", "zz", "abc", strings.Repeat("61", 128), strings.Repeat("61", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		sid, err := ParseSessionHint(h)
		if err != nil {
			if !errors.Is(err, ErrBadSessionHint) || sid != "" {
				t.Fatalf("refused %q with %q, %v", h, sid, err)
			}
			return
		}
		if len(sid) > MaxSessionIDLen || sid.Hint() != strings.ToLower(h) {
			t.Fatalf("accepted %q as %q (hint %q)", h, sid, sid.Hint())
		}
	})
}

// FuzzCheckOperator: the operator's credential, "Authorization: Bearer
// <SECRET>" or the internal secret header. It passes exactly when the
// credential, as documented, is the secret.
func FuzzCheckOperator(f *testing.F) {
	f.Add("Bearer s3cret", "")
	f.Add("bearer  s3cret ", "")
	f.Add("Basic s3cret", "")
	f.Add("", "s3cret")
	f.Add("Bearer wrong", "s3cret")
	f.Add("Bearer ", "")
	f.Fuzz(func(t *testing.T, auth, internal string) {
		const secret = "s3cret"
		r := &http.Request{Header: http.Header{}}
		if auth != "" {
			r.Header["Authorization"] = []string{auth}
		}
		if internal != "" {
			r.Header.Set(HeaderInternalSecret, internal)
		}
		want := internal == secret ||
			internal == "" && len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") && strings.TrimSpace(auth[7:]) == secret
		err := CheckOperator(r, secret)
		if (err == nil) != want || err != nil && !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("CheckOperator(%q, %q) = %v, want pass %v", auth, internal, err, want)
		}
	})
}
