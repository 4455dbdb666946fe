package wire

import "testing"

func TestParseHTTPURL(t *testing.T) {
	for s, want := range map[string]bool{
		"http://b": true, "https://b:8443/x": true, "http://[::1]:80": true,
		"": false, "b.fly.dev": false, "127.0.0.1:8080": false, "ftp://b": false,
		"http://": false, "https:///x": false, "ws://e": false, "http://a b": false,
	} {
		if _, ok := ParseHTTPURL(s); ok != want {
			t.Errorf("ParseHTTPURL(%q) ok = %v, want %v", s, ok, want)
		}
	}
}

// FuzzParseHTTPURL: whatever the input, an accepted URL is http or https
// with a host, and nothing panics.
func FuzzParseHTTPURL(f *testing.F) {
	for _, s := range []string{"http://b", "https://u:p@h:1/x?q#f", "127.0.0.1:8080", "http://[::1", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, ok := ParseHTTPURL(s)
		if ok && (u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			t.Fatalf("accepted %q as %+v", s, u)
		}
	})
}
