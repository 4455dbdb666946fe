package wstransport

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// FuzzCheckHandshake: the WebSocket upgrade headers. checkHandshake exists
// to refuse, in JSON, exactly what coder/websocket's Accept would refuse in
// plain text: for any method, protocol and header values, it passes if and
// only if Accept gets past its own checks (to the hijack, which the test's
// writer cannot do).
func FuzzCheckHandshake(f *testing.F) {
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	f.Add("GET", uint8(1), "Upgrade", "websocket", key, "13")
	f.Add("GET", uint8(1), "keep-alive, Upgrade", "WebSocket", key, "13")
	f.Add("GET", uint8(0), "Upgrade", "websocket", key, "13")
	f.Add("POST", uint8(1), "Upgrade", "websocket", key, "13")
	f.Add("GET", uint8(1), "Upgrade", "websocket", key, "8")
	f.Add("GET", uint8(1), "Upgrade", "h2c", key, "13")
	f.Add("GET", uint8(1), "Upgrade", "websocket", "short", "13")
	f.Add("GET", uint8(1), "Upgrade", "websocket", " "+key+" ", "13")
	f.Add("GET", uint8(1), "Upgrade", "websocket", key+"\x00"+key, "13")
	f.Fuzz(func(t *testing.T, method string, minor uint8, connection, upgrade, keys, version string) {
		r := &http.Request{Method: method, ProtoMajor: 1, ProtoMinor: int(minor % 3), Header: http.Header{}}
		set := func(name, v string) {
			// NUL separates several values of one header.
			for p := range strings.SplitSeq(v, "\x00") {
				r.Header.Add(name, p)
			}
		}
		set("Connection", connection)
		set("Upgrade", upgrade)
		set("Sec-WebSocket-Key", keys)
		set("Sec-WebSocket-Version", version)
		ours := checkHandshake(&nopWriter{h: http.Header{}}, r) == nil
		_, err := websocket.Accept(&nopWriter{h: http.Header{}}, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		theirs := err != nil && strings.Contains(err.Error(), "does not implement http.Hijacker")
		if ours != theirs {
			t.Fatalf("checkHandshake passes %v, Accept %v (%v) for %+v", ours, theirs, err, r.Header)
		}
	})
}

// nopWriter is an http.ResponseWriter that cannot hijack.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) WriteHeader(int)             {}
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
