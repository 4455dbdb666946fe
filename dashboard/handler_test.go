package dashboard

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestHandlerServesThePageWithStrictHeaders(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for path, ctype := range map[string]string{
		"/dashboard/": "text/html", "/dashboard/app.js": "text/javascript", "/dashboard/app.css": "text/css",
	} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("%s: %d %q, %d bytes", path, res.StatusCode, res.Header.Get("Content-Type"), len(body))
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if res.Header.Get("X-Frame-Options") != "DENY" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, res.Header)
		}
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(srv.URL + "/dashboard")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/dashboard/" {
		t.Errorf("/dashboard: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	// A sign-in form submitted before app.js took it posts the key here:
	// refused, and not echoed.
	res, err = http.Post(srv.URL+"/dashboard/", "application/x-www-form-urlencoded", strings.NewReader("key=0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || strings.Contains(string(body), "0123") {
		t.Errorf("POST: %d %q", res.StatusCode, body)
	}
	res, err = http.Get(srv.URL + "/dashboard/missing.js")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("missing file: %d", res.StatusCode)
	}
}

// Works offline: no asset loads anything from another origin, and no
// inline script or style needs the CSP relaxed.
func TestAssetsAreSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?https?:`)
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s loads from another origin: %q", p, m)
		}
		if strings.HasSuffix(p, ".html") && (regexp.MustCompile(`<script>|<script [^>]*>[^<]`).Match(b) || strings.Contains(string(b), "<style") || strings.Contains(string(b), " style=")) {
			t.Errorf("%s has inline script or style", p)
		}
		if strings.HasSuffix(p, ".js") && (strings.Contains(string(b), "innerHTML") || strings.Contains(string(b), "?key=")) {
			t.Errorf("%s writes HTML from data or puts the key in a URL", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
