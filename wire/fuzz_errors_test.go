package wire

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
)

// FuzzDecodeError: every non-2xx answer of a relay or a balancer is read
// with DecodeError. Whatever the body, it gives a non-nil *Error with a
// code and the answer's status; a body in the purrfly shape keeps its code,
// and WriteError's own output decodes to the error it wrote.
func FuzzDecodeError(f *testing.F) {
	for _, e := range []*Error{ErrRoomNotFound, ErrRateLimited, ErrBadHeader.WithMessage("header name is too long")} {
		b, _ := json.Marshal(e)
		f.Add(e.Status, b)
	}
	f.Add(502, []byte("<html>Bad Gateway</html>"))
	f.Add(503, []byte(`{"code":"","error":"x"}`))
	f.Add(404, []byte(`{"code":7}`))
	f.Add(-1, []byte(`null`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := DecodeError(status, body)
		if e == nil || e.Code == "" || e.Status != status {
			t.Fatalf("DecodeError(%d, %q) = %+v", status, body, e)
		}
		// A body in the purrfly shape (every field of its type) keeps its
		// code and message; anything else is http_<status>.
		var shape Error
		if json.Unmarshal(body, &shape) == nil && shape.Code != "" {
			if e.Code != shape.Code || e.Message != shape.Message || e.Retryable != shape.Retryable {
				t.Fatalf("%s decoded as %+v", body, e)
			}
		} else if e.Code != "http_"+strconv.Itoa(status) {
			t.Fatalf("%s decoded as %+v", body, e)
		}
		if status < 400 || status > 599 {
			return
		}
		// What WriteError answers, DecodeError reads back.
		w := &recorder{h: http.Header{}}
		WriteError(w, e)
		if back := DecodeError(w.code, w.body); back.Code != e.Code || back.Message != e.Message || back.Retryable != e.Retryable || w.code != status {
			t.Fatalf("WriteError/DecodeError: %+v -> %d %s -> %+v", e, w.code, w.body, back)
		}
	})
}

// recorder is the least http.ResponseWriter (httptest is not needed).
type recorder struct {
	h    http.Header
	code int
	body []byte
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(b []byte) (int, error) { r.body = append(r.body, b...); return len(b), nil }
