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

	"github.com/purrfly/purrfly/internal/limit"
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
		start := time.Now() // wall clock: the deadline of a real socket
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

// Allocations and joins are limited per source address (Fly-Client-IP
// behind Fly's proxy): past the burst, 429 rate_limited with Retry-After;
// another source is not affected; the next token comes with time.
func TestRateLimitsPerSource(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.AllocateRate, o.JoinRate = limit.PerMinute(60, 2), limit.PerMinute(60, 1)
		o.ClientIPHeader = wire.HeaderFlyClientIP
	})
	f := newFakeRelay(t, "eu")
	f.register(h)
	alloc := func(ip, name string) (int, http.Header, []byte) {
		st, body, hdr := h.do(http.MethodPost, "/allocate_ws", map[string]string{wire.HeaderFlyClientIP: ip,
			wire.HeaderName: name, wire.HeaderRegion: "eu", wire.HeaderAllocationID: "id-" + name}, nil)
		return st, hdr, body
	}
	for i, name := range []string{"a1", "a2"} {
		if st, _, body := alloc("203.0.113.1", name); st != http.StatusOK {
			t.Fatalf("allocation %d within the burst: %d %s", i, st, body)
		}
	}
	st, hdr, body := alloc("203.0.113.1", "a3")
	if st != http.StatusTooManyRequests || hdr.Get("Retry-After") != "1" || !strings.Contains(string(body), `"rate_limited"`) ||
		!strings.Contains(string(body), `"retryable":true`) {
		t.Fatalf("past the burst: %d %q %s", st, hdr.Get("Retry-After"), body)
	}
	if st, _, body := alloc("203.0.113.2", "b1"); st != http.StatusOK {
		t.Fatalf("another source: %d %s", st, body)
	}
	h.clk.Advance(time.Second)
	if st, _, body := alloc("203.0.113.1", "a3"); st != http.StatusOK {
		t.Fatalf("a second later: %d %s", st, body)
	}
	join := func(ip string) int {
		st, _, _ := h.do(http.MethodGet, "/join", map[string]string{wire.HeaderFlyClientIP: ip, wire.HeaderName: "a1"}, nil)
		return st
	}
	if join("198.51.100.1") == http.StatusTooManyRequests || join("198.51.100.1") != http.StatusTooManyRequests {
		t.Fatal("joins are not limited per source")
	}
}
