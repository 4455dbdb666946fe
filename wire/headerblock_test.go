package wire

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/purrfly/purrfly/internal/testutil"
)

// Rule (README, Limits: "header block ... 16 KiB"): a request line and
// header block of exactly MaxHeaderBytes is served, one byte more is 431
// header_too_large in the JSON shape, on a new connection and on a
// kept-alive one alike. net/http's MaxHeaderBytes alone let 20,480 bytes
// through on a new connection and 24,576 on a kept one.
func TestHeaderBlockLimitIsExact(t *testing.T) {
	srv := &http.Server{Handler: Common(Handler(func(w http.ResponseWriter, r *http.Request) error {
		WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
		return nil
	}))}
	HTTPLimits{}.Apply(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	for _, kept := range []bool{false, true} {
		if st, body := testutil.HeaderBlock(t, ln.Addr().String(), "/", MaxHeaderBytes, kept); st != http.StatusOK {
			t.Fatalf("kept=%v: a %d-byte header block answered %d %s, want 200", kept, MaxHeaderBytes, st, body)
		}
		for _, size := range []int{MaxHeaderBytes + 1, 20400, 24500} {
			st, body := testutil.HeaderBlock(t, ln.Addr().String(), "/", size, kept)
			if st != http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("kept=%v: a %d-byte header block answered %d %s, want 431", kept, size, st, body)
			}
			if e := DecodeError(st, []byte(body)); size <= 20000 && !errors.Is(e, ErrHeaderTooLarge) {
				t.Fatalf("kept=%v: a %d-byte header block answered %s, want the JSON error %s", kept, size, body, ErrHeaderTooLarge.Code)
			}
		}
	}
}
