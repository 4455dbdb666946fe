package balancer

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// The balancer closes a request that declares a body and never sends it,
// and one that trickles its headers, at its HTTP limits; CONNECT and
// unclean paths get JSON errors, not ServeMux's HTML.
func TestHTTPLimitsAndOddRequests(t *testing.T) {
	limits := wire.HTTPLimits{Header: 200 * time.Millisecond, Read: 400 * time.Millisecond, Write: time.Second, Idle: time.Second}
	h := newHarness(t, func(o *Options) { o.HTTP = limits })
	u, _ := url.Parse(h.s.URL())
	for what, req := range map[string]string{
		"a silent body":      "GET /ping HTTP/1.1\r\nHost: b\r\nContent-Length: 200000\r\n\r\n",
		"unfinished headers": "GET /ping HTTP/1.1\r\nHost: b\r\n",
	} {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, _ = io.WriteString(c, req)
		_ = c.SetReadDeadline(start.Add(limits.Read + 3*time.Second)) // wall clock: bounds the server's timers
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("%s: still open (%v)", what, err)
		}
		c.Close()
	}
	for _, req := range []string{"CONNECT b:443 HTTP/1.1\r\nHost: b:443\r\n\r\n", "GET /../servers HTTP/1.1\r\nHost: b\r\n\r\n"} {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Close()
		if resp.StatusCode < 400 || !strings.Contains(string(body), `"retryable"`) {
			t.Fatalf("%q: %d %s, want a JSON error", req[:strings.Index(req, "\r\n")], resp.StatusCode, body)
		}
	}
}
