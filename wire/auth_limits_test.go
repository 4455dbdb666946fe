package wire

import (
	"errors"
	"strings"
	"testing"
)

// Rule: an authentication message of exactly MaxAuthSize bytes is parsed;
// one byte more is refused before parsing.
func TestAuthMessageAtItsLimit(t *testing.T) {
	msg := `{"roomName":"r","clientSecret":"s"}`
	atLimit := msg + strings.Repeat(" ", MaxAuthSize-len(msg))
	if a, err := ParseAuth([]byte(atLimit)); err != nil || a.RoomName != "r" {
		t.Fatalf("ParseAuth(%d bytes) = %+v, %v; want accepted", len(atLimit), a, err)
	}
	if _, err := ParseAuth([]byte(atLimit + " ")); !errors.Is(err, ErrBadAuth) {
		t.Fatalf("ParseAuth(%d bytes) = %v, want bad_auth", len(atLimit)+1, err)
	}
}

// Rule: the room name may be MaxSessionIDLen bytes long, and the client
// secret and a migrating host's provisional secret MaxSecretLen bytes long,
// not one more.
func TestAuthFieldsAtTheirLimits(t *testing.T) {
	at, past := strings.Repeat("k", MaxSecretLen), strings.Repeat("k", MaxSecretLen+1)
	room, longRoom := strings.Repeat("r", MaxSessionIDLen), strings.Repeat("r", MaxSessionIDLen+1)
	for _, c := range []struct {
		name, json string
		ok         bool
	}{
		{"room name at the limit", `{"roomName":"` + room + `","clientSecret":"s"}`, true},
		{"room name past the limit", `{"roomName":"` + longRoom + `","clientSecret":"s"}`, false},
		{"client secret at the limit", `{"roomName":"r","clientSecret":"` + at + `"}`, true},
		{"client secret past the limit", `{"roomName":"r","clientSecret":"` + past + `"}`, false},
		{"provisional secret at the limit", `{"roomName":"r","clientSecret":"s","provisionalHostSecret":"` + at + `"}`, true},
		{"provisional secret past the limit", `{"roomName":"r","clientSecret":"s","provisionalHostSecret":"` + past + `"}`, false},
	} {
		_, err := ParseAuth([]byte(c.json))
		if c.ok && err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrBadAuth) {
			t.Errorf("%s: %v, want bad_auth", c.name, err)
		}
	}
}
