package wire

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
)

// Handler is an HTTP handler that returns its error; Handle turns it into an
// http.Handler that answers the error in the purrfly shape.
type Handler func(w http.ResponseWriter, r *http.Request) error

// ServeHTTP implements http.Handler.
func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h(w, r); err != nil {
		WriteError(w, err)
	}
}

// Common sets the headers every purrfly answer carries (no caching anywhere,
// since credentials travel in answers; CORS for WebGL builds), answers CORS
// preflights, refuses in JSON what ServeMux would answer itself (CONNECT,
// unclean paths), and caps header and body sizes (a header block over
// MaxHeaderBytes, counted as headerBlockLen does, is 431
// header_too_large). Relay and balancer both wrap their whole mux in it.
func Common(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Cache-Control"] = noStore
		h["Pragma"] = noCache
		h["Access-Control-Allow-Origin"] = anyOrigin
		if headerBlockLen(r) > MaxHeaderBytes {
			WriteError(w, ErrHeaderTooLarge)
			return
		}
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" && len(req) <= MaxHeaderValueLen {
				h.Set("Access-Control-Allow-Headers", req)
			} else {
				h.Set("Access-Control-Allow-Headers", "*")
			}
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if err := checkTarget(r); err != nil {
			WriteError(w, err)
			return
		}
		// A request without a body (net/http's NoBody: no Content-Length,
		// not chunked), as every allocation and join is, has nothing to
		// cap.
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodySize)
		}
		next.ServeHTTP(w, r)
	})
}

// The values Common sets on every answer, shared by all of them rather
// than allocated for each: an answer's header values are only ever
// replaced (Set, Del) or appended to, and each slice's capacity is its
// length, so an Add copies it.
var (
	noStore   = []string{"no-store, private"}
	noCache   = []string{"no-cache"}
	anyOrigin = []string{"*"}
	jsonType  = []string{"application/json"}
)

// SecretEqual compares two secrets in constant time. Both are hashed first so
// that neither the content nor the length of either leaks through timing.
func SecretEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// SetInternal marks an outgoing internal request (relay <-> balancer, or a
// relay's link to another machine): the shared secret and this side's
// protocol version. secret is the SECRET list, of which the first value is
// sent (SendSecret). CheckInternal is the receiving side.
func SetInternal(h http.Header, secret string) {
	SetHeaders(h, HeaderInternalSecret, SendSecret(secret))
	SetInternalVersion(h)
}

// SetInternalVersion puts this side's internal protocol version on a
// request or an answer.
func SetInternalVersion(h http.Header) { h[versionKey] = internalVersion }

// internalVersion is InternalProtocolVersion as a header value, shared
// like Common's values; versionKey is its header's canonical name.
var (
	internalVersion = []string{strconv.Itoa(InternalProtocolVersion)}
	versionKey      = CanonicalKey(HeaderInternalVersion)
)

// CheckInternal verifies the internal shared secret of a request: any value
// of the SECRET list secret (SecretIn).
func CheckInternal(r *http.Request, secret string) error {
	if !SecretIn(HeaderGet(r.Header, HeaderInternalSecret), secret) {
		return ErrUnauthorized
	}
	return nil
}
