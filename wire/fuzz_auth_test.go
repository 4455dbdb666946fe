package wire

import (
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzParseAuth: the first message of every relay connection. A refused
// message is ErrBadAuth with a zero Auth; an accepted one obeys the limits
// (a room and a secret unless it is a pipe, every field within its bound)
// and re-encodes (Marshal, as PurrNet sends it) to a message that parses to
// the same Auth.
func FuzzParseAuth(f *testing.F) {
	for _, s := range []string{
		`{"roomName":"r1","clientSecret":"s","nat":false,"pipe":false}`,
		`{"roomName": "My Room", "clientSecret": "c0ffee", "nat": true, "pipe": false}`,
		`{"pipe":true}`,
		`{"roomName":"r","clientSecret":"s","provisionalHostSecret":"p"}`,
		` {"roomName":"r","clientSecret":"s"}` + "\n",
		`{"roomName":"r","clientSecret":"s","roomName":"q"}`,
		`{"roomName":"\u00e9\ud83d\ude00","clientSecret":"s"}`,
		`{"roomName":1}`, `null`, `[]`, "\xff\xfe", ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAuth(b)
		if err != nil {
			if !errors.Is(err, ErrBadAuth) || a != (Auth{}) {
				t.Fatalf("refused with %v and %+v", err, a)
			}
			return
		}
		if len(b) > MaxAuthSize || !utf8.Valid(b) {
			t.Fatalf("accepted %d bytes (valid UTF-8 %v)", len(b), utf8.Valid(b))
		}
		if !a.Pipe && (a.RoomName == "" || len(a.RoomName) > MaxSessionIDLen ||
			a.ClientSecret == "" || len(a.ClientSecret) > MaxSecretLen || len(a.ProvisionalHostSecret) > MaxSecretLen) {
			t.Fatalf("accepted out of bounds: %+v", a)
		}
		again, err := ParseAuth(a.Marshal())
		if err != nil && len(a.Marshal()) <= MaxAuthSize {
			t.Fatalf("re-encoded %s refused: %v", a.Marshal(), err)
		}
		if err == nil && !reflect.DeepEqual(again, a) {
			t.Fatalf("round trip %+v -> %+v", a, again)
		}
	})
}
