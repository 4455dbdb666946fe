package wire

import (
	"net/http"
	"reflect"
	"testing"
)

// HeaderGet, CanonicalKey and SetHeaders are Header.Get, the canonical
// key and Header.Set, for this package's names and any other.
func TestHeaderKeysAreNetHTTPs(t *testing.T) {
	names := []string{"x-unknown_name", "Content-Type", "lower"}
	for n := range headerKeys {
		names = append(names, n)
	}
	for _, n := range names {
		h := http.Header{}
		h.Set(n, "v-"+n)
		if got := HeaderGet(h, n); got != h.Get(n) {
			t.Errorf("HeaderGet(%q) = %q, Header.Get %q", n, got, h.Get(n))
		}
		if got := HeaderGet(http.Header{}, n); got != "" {
			t.Errorf("HeaderGet(%q) of no header = %q", n, got)
		}
		a, b := http.Header{}, http.Header{}
		SetHeaders(a, n, "1", "Other", "2")
		b.Set(n, "1")
		b.Set("Other", "2")
		if !reflect.DeepEqual(a, b) {
			t.Errorf("SetHeaders(%q) = %v, Header.Set %v", n, a, b)
		}
		a.Add(n, "3") // an Add copies the shared array: the neighbour keeps its value
		if a.Get("Other") != "2" || len(a.Values(n)) != 2 {
			t.Errorf("after an Add: %v", a)
		}
	}
}
