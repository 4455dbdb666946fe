package wire

import (
	"net/http"
	"strings"
	"testing"
)

func TestSecretList(t *testing.T) {
	for _, c := range []struct {
		list  string
		valid bool
		send  string
	}{
		{"PURRNET", true, "PURRNET"},
		{"new,old", true, "new"},
		{"a,b,c,d", true, "a"},
		{"a,b,c,d,e", false, ""},
		{"", false, ""},
		{"a,", false, ""},
		{",a", false, ""},
		{"a, b", false, ""},
		{"a,b c", false, ""},
		{strings.Repeat("x", MaxSecretLen) + ",y", true, strings.Repeat("x", MaxSecretLen)},
		{strings.Repeat("x", MaxSecretLen+1) + ",y", false, ""},
	} {
		if got := ValidSecretList(c.list); got != c.valid {
			t.Errorf("ValidSecretList(%.20q) = %v, want %v", c.list, got, c.valid)
		}
		if c.valid && SendSecret(c.list) != c.send {
			t.Errorf("SendSecret(%.20q) = %.20q, want %.20q", c.list, SendSecret(c.list), c.send)
		}
	}
	for _, c := range []struct {
		got, list string
		in        bool
	}{
		{"old", "new,old", true},
		{"new", "new,old", true},
		{"new,old", "new,old", false}, // the list itself is no value of it
		{"ne", "new,old", false},
		{"", "new,old", false},
		{"other", "new,old", false},
		{"d", "a,b,c,d", true},
	} {
		if got := SecretIn(c.got, c.list); got != c.in {
			t.Errorf("SecretIn(%q, %q) = %v, want %v", c.got, c.list, got, c.in)
		}
	}
}

// Each step of a rotation (old -> "old,new" -> "new,old" -> "new") deployed
// beside the one before or after it: whatever either side sends, the other
// accepts, over the internal header and as the operator's bearer.
func TestRotationStepsAcceptEachOther(t *testing.T) {
	steps := []string{"old", "old,new", "new,old", "new"}
	for i := 0; i+1 < len(steps); i++ {
		for _, pair := range [][2]string{{steps[i], steps[i+1]}, {steps[i+1], steps[i]}} {
			from, to := pair[0], pair[1]
			r, _ := http.NewRequest(http.MethodGet, "/", nil)
			SetInternal(r.Header, from)
			if err := CheckInternal(r, to); err != nil {
				t.Errorf("a service on SECRET %q refuses one on %q: %v", to, from, err)
			}
			r, _ = http.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Authorization", "Bearer "+SendSecret(from))
			if err := CheckOperator(r, to); err != nil {
				t.Errorf("an operator route on SECRET %q refuses the deploy tool on %q: %v", to, from, err)
			}
		}
	}
	// Two steps apart is where the rotation must wait: "old" alone is not
	// accepted once the list is "new".
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	SetInternal(r.Header, "old")
	if CheckInternal(r, "new") == nil {
		t.Error("SECRET new accepts old")
	}
}
