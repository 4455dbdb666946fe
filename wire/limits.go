package wire

import (
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// HTTPLimits bound the waits of one HTTP server (relay, balancer, flysim):
// a slow but honest client on a bad mobile network still gets through
// (a request's headers in 10 s, the whole request in 30 s), while one
// that declares a body and sends nothing, or trickles its headers, is
// closed at those bounds. Zero fields take the defaults.
type HTTPLimits struct {
	Header time.Duration // HTTP_HEADER_TIMEOUT_SECONDS: the request line and headers (default 10 s)
	Read   time.Duration // HTTP_READ_TIMEOUT_SECONDS: the whole request, body included (default 30 s)
	Write  time.Duration // HTTP_WRITE_TIMEOUT_SECONDS: writing the answer (default 30 s)
	Idle   time.Duration // HTTP_IDLE_TIMEOUT_SECONDS: a kept-alive connection between requests (default 60 s)
}

// Defaults of HTTPLimits.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultReadTimeout   = 30 * time.Second
	DefaultWriteTimeout  = 30 * time.Second
	DefaultIdleTimeout   = 60 * time.Second
)

// WithDefaults fills the zero fields.
func (l HTTPLimits) WithDefaults() HTTPLimits {
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&l.Header, DefaultHeaderTimeout}, {&l.Read, DefaultReadTimeout}, {&l.Write, DefaultWriteTimeout}, {&l.Idle, DefaultIdleTimeout}} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
	return l
}

// Apply sets the limits (and MaxHeaderBytes) on srv. They end at a
// hijack (net/http clears the connection's deadlines): an upgraded
// WebSocket lives by its own bounds.
func (l HTTPLimits) Apply(srv *http.Server) {
	l = l.WithDefaults()
	srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = l.Header, l.Read, l.Write, l.Idle
	srv.MaxHeaderBytes = MaxHeaderBytes
}

// ErrBadPath answers a request whose target is not a clean absolute path
// ("*", "/../x", "//x"): net/http's ServeMux would redirect it with HTML.
var ErrBadPath = newErr(http.StatusBadRequest, "bad_path", false, "the request path must be clean and absolute")

// checkTarget refuses what ServeMux would answer itself, in HTML or plain
// text: CONNECT, and unclean or relative paths. Cleanliness is judged on
// the escaped path, as ServeMux judges it: a percent-encoded '/' or '.'
// inside a segment ("/v1/rooms/..%2Fx", a room named "../x") is part of
// that segment, not a step between directories.
func checkTarget(r *http.Request) error {
	if r.Method == http.MethodConnect {
		return ErrMethodNotAllowed
	}
	p := r.URL.EscapedPath()
	if p == "" || p[0] != '/' {
		return ErrBadPath
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean != p {
		return ErrBadPath
	}
	return nil
}

// ClientIP is the caller's address: header's value when set (Fly's proxy
// puts the client's address in Fly-Client-IP; trust it only behind Fly),
// else the TCP peer's address.
func ClientIP(r *http.Request, header string) string {
	if header != "" {
		if v := strings.TrimSpace(r.Header.Get(header)); v != "" && len(v) <= 64 {
			return v
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// Throttled is ErrThrottled (too many failed authentications from the
// caller's address) with its Retry-After (whole seconds, at least 1) set
// on w.
func Throttled(w http.ResponseWriter, wait time.Duration) error {
	_ = RateLimited(w, wait) // sets Retry-After
	return ErrThrottled
}

// RateLimited is ErrRateLimited with its Retry-After (whole seconds, at
// least 1) set on w.
func RateLimited(w http.ResponseWriter, wait time.Duration) error {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	return ErrRateLimited
}
