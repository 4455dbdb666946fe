package balancer

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// appendingProxy is a reverse proxy in front of h's balancer that extends
// the client's X-Forwarded-For with the address it saw, as nginx's
// $proxy_add_x_forwarded_for, Caddy and Traefik do.
func appendingProxy(t *testing.T, h *harness) string {
	t.Helper()
	target, err := url.Parse(h.s.URL())
	if err != nil {
		t.Fatal(err)
	}
	p := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
		pr.SetXForwarded()
	}})
	t.Cleanup(p.Close)
	return p.URL
}

// TestAdminSourceBehindProxy: behind a proxy that appends to
// X-Forwarded-For, a client that writes a fresh first hop into every
// request is still one source: its failures are throttled together and
// the logs name the address the proxy saw, never the forged one. (Read
// from the first hop, each guess came from a new address and was
// answered.)
func TestAdminSourceBehindProxy(t *testing.T) {
	h, logs := adminHarness(t, nil, func(o *Options) {
		o.AuthFailureRate = limit.Rate{Every: time.Hour, Burst: 3}
		o.TrustProxy = true
	})
	proxy := appendingProxy(t, h)
	attacker, operator := testutil.ClientFrom(t, "127.0.0.2"), testutil.ClientFrom(t, "127.0.0.3")
	via := func(c *http.Client, method, path, key, forged string) (int, []byte, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, proxy+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Forwarded-For", forged)
		return send(t, c, req)
	}
	for i := range 3 {
		if st, body, _ := via(attacker, http.MethodGet, wire.PathStats, "wrong-key-0123456789", "203.0.113."+strconv.Itoa(i)); st != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d %s", i, st, body)
		}
	}
	st, body, hd := via(attacker, http.MethodGet, wire.PathStats, adminKeyA, "203.0.113.99")
	wantErrBody(t, st, body, http.StatusTooManyRequests, wire.ErrThrottled.Code)
	if hd.Get("Retry-After") == "" {
		t.Fatalf("throttled without Retry-After: %v", hd)
	}
	// Another client behind the same proxy is its own source.
	if st, body, _ := via(operator, http.MethodGet, wire.PathStats, adminKeyA, "203.0.113.0"); st != http.StatusOK {
		t.Fatalf("another client behind the proxy, claiming the throttled address: %d %s", st, body)
	}
	// The audit log names the address the proxy appended.
	via(operator, http.MethodDelete, "/v1/rooms/no-such-room", adminKeyA, "198.51.100.66")
	out := logs.String()
	if strings.Contains(out, "203.0.113.") || strings.Contains(out, "198.51.100.66") {
		t.Fatalf("a forged first hop reached the logs:\n%s", out)
	}
	if !strings.Contains(out, "admin authentication failed") || !strings.Contains(out, "source=127.0.0.2") {
		t.Fatalf("the failures do not name the proxy-appended source 127.0.0.2:\n%s", out)
	}
	if !strings.Contains(out, "admin audit") || !strings.Contains(out, "source=127.0.0.3") {
		t.Fatalf("the audit line does not name the proxy-appended source 127.0.0.3:\n%s", out)
	}
}
