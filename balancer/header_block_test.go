package balancer

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestHeaderBlockLimit: the balancer serves a request whose line and
// headers are 16 KiB (the documented bound) and refuses one byte more with
// 431 header_too_large, on a new connection and on a kept-alive one; the
// 20,400- and 24,500-byte blocks it accepted before are refused.
func TestHeaderBlockLimit(t *testing.T) {
	h := newHarness(t, nil)
	addr := strings.TrimPrefix(h.s.URL(), "http://")
	for _, kept := range []bool{false, true} {
		if st, body := testutil.HeaderBlock(t, addr, wire.PathHealthz, wire.MaxHeaderBytes, kept); st != http.StatusOK {
			t.Fatalf("kept=%v: %d bytes of headers answered %d %s", kept, wire.MaxHeaderBytes, st, body)
		}
		for _, size := range []int{wire.MaxHeaderBytes + 1, 20400, 24500} {
			st, body := testutil.HeaderBlock(t, addr, wire.PathHealthz, size, kept)
			if st != http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("kept=%v: %d bytes of headers answered %d %s, want 431", kept, size, st, body)
			}
			if size < 20000 && !errors.Is(wire.DecodeError(st, []byte(body)), wire.ErrHeaderTooLarge) {
				t.Fatalf("kept=%v: %d bytes of headers answered %s, want %s", kept, size, body, wire.ErrHeaderTooLarge.Code)
			}
		}
	}
}
