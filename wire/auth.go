package wire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// MaxAuthSize bounds the authentication message. Real clients send well under
// 1 KiB; anything larger is refused before it is parsed.
const MaxAuthSize = 4096

// MaxSecretLen bounds any credential (room client/host secret, SECRET).
const MaxSecretLen = 256

// Auth is the first message on every relay connection (UTF-8 JSON).
type Auth struct {
	RoomName     string `json:"roomName"`
	ClientSecret string `json:"clientSecret"`
	NAT          bool   `json:"nat"`
	Pipe         bool   `json:"pipe"`
	// ProvisionalHostSecret is sent by a host being promoted by migration.
	ProvisionalHostSecret string `json:"provisionalHostSecret,omitempty"`
}

// ParseAuth decodes and validates an authentication message. A pipe needs no
// room; every other connection needs a room name and a secret.
func ParseAuth(b []byte) (Auth, error) {
	var a Auth
	if len(b) == 0 || len(b) > MaxAuthSize || !utf8.Valid(b) {
		return a, ErrBadAuth
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return a, ErrBadAuth
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return Auth{}, ErrBadAuth
	}
	if a.Pipe {
		return a, nil
	}
	if a.RoomName == "" || len(a.RoomName) > MaxSessionIDLen ||
		a.ClientSecret == "" || len(a.ClientSecret) > MaxSecretLen ||
		len(a.ProvisionalHostSecret) > MaxSecretLen {
		return Auth{}, ErrBadAuth
	}
	return a, nil
}

// Marshal encodes the authentication message as PurrNet sends it.
func (a Auth) Marshal() []byte {
	b, _ := json.Marshal(a)
	return b
}
