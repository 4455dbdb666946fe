package wire

import "net/http"

// ErrHeaderTooLarge answers a request whose header block (request line and
// header fields) is over MaxHeaderBytes.
var ErrHeaderTooLarge = newErr(http.StatusRequestHeaderFieldsTooLarge, "header_too_large", false,
	"the request line and headers are over 16 KiB")

// headerBlockLen is the size of r's request line and header block as a
// client writes them without optional whitespace: "METHOD target
// PROTO\r\n", "Name: value\r\n" per field (Host included) and the blank
// line. net/http's own MaxHeaderBytes is not this bound: it lets 4 KiB more
// through on a new connection and up to 8 KiB more on a kept-alive one
// (its read limit adds slack, and a kept connection's buffer already holds
// part of the next request), so Common counts for itself.
func headerBlockLen(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2 + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}
