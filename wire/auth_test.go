package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAuth(t *testing.T) {
	a, err := ParseAuth([]byte(`{"roomName":"r1","clientSecret":"s","nat":false,"pipe":false}`))
	if err != nil || a.RoomName != "r1" || a.ClientSecret != "s" {
		t.Fatalf("auth = %+v, %v", a, err)
	}
	if a, err := ParseAuth([]byte(`{"pipe":true}`)); err != nil || !a.Pipe {
		t.Fatalf("pipe auth = %+v, %v", a, err)
	}
	bad := []string{
		``, `null`, `[]`, `{"roomName":1}`, `{"roomName":"r"}`, `{"clientSecret":"s"}`,
		`{"roomName":"` + strings.Repeat("x", MaxSessionIDLen+1) + `","clientSecret":"s"}`,
		`{"roomName":"r","clientSecret":"` + strings.Repeat("x", MaxAuthSize) + `"}`,
		"\xff\xfe",
	}
	for _, in := range bad {
		if _, err := ParseAuth([]byte(in)); !errors.Is(err, ErrBadAuth) {
			t.Errorf("ParseAuth(%.40q) = %v, want bad_auth", in, err)
		}
	}
}

func TestAuthMarshalFieldNames(t *testing.T) {
	got := string(Auth{RoomName: "r", ClientSecret: "s", NAT: true}.Marshal())
	want := `{"roomName":"r","clientSecret":"s","nat":true,"pipe":false}`
	if got != want {
		t.Fatalf("auth json = %s, want %s", got, want)
	}
}

func TestValidSecret(t *testing.T) {
	for s, want := range map[string]bool{
		"PURRNET": true, "a-b_c.d!~": true, "": false, "has space": false,
		"tab\t": false, "é": false, strings.Repeat("x", MaxSecretLen+1): false,
	} {
		if ValidSecret(s) != want {
			t.Errorf("ValidSecret(%q) = %v", s, !want)
		}
	}
	if !SecretEqual("abc", "abc") || SecretEqual("abc", "abd") || SecretEqual("abc", "abcd") {
		t.Fatal("SecretEqual")
	}
}

func TestSessionHint(t *testing.T) {
	sid := SessionID("room/1")
	got, err := ParseSessionHint(sid.Hint())
	if err != nil || got != sid {
		t.Fatalf("hint round trip = %q, %v", got, err)
	}
	if _, err := ParseSessionHint("zz"); !errors.Is(err, ErrBadSessionHint) {
		t.Fatal("bad hex accepted")
	}
	if s, err := ParseSessionHint(""); err != nil || s != "" {
		t.Fatal("empty hint")
	}
}
