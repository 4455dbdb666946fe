package wire

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// Rule: a header value of exactly max bytes is read; one byte more is a
// bad_header naming the header.
func TestHeaderValueAtItsLimit(t *testing.T) {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set(HeaderRegion, strings.Repeat("r", MaxRegionLen))
	if v, err := HeaderValue(r, HeaderRegion, MaxRegionLen); err != nil || len(v) != MaxRegionLen {
		t.Fatalf("HeaderValue at the limit = %d bytes, %v", len(v), err)
	}
	if _, err := OptionalHeader(r, HeaderRegion, MaxRegionLen); err != nil {
		t.Fatalf("OptionalHeader at the limit: %v", err)
	}
	r.Header.Set(HeaderRegion, strings.Repeat("r", MaxRegionLen+1))
	_, err := HeaderValue(r, HeaderRegion, MaxRegionLen)
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrBadHeader.Code || e.Message != "header region is too long" {
		t.Fatalf("HeaderValue past the limit = %v, want bad_header \"header region is too long\"", err)
	}
	if _, err := OptionalHeader(r, HeaderRegion, MaxRegionLen); !errors.Is(err, ErrBadHeader) {
		t.Fatalf("OptionalHeader past the limit = %v, want bad_header", err)
	}
}

// Rule: the shared SECRET may be MaxSecretLen bytes long, not one more.
func TestValidSecretAtItsLimit(t *testing.T) {
	if !ValidSecret(strings.Repeat("k", MaxSecretLen)) {
		t.Fatal("a secret of MaxSecretLen bytes refused")
	}
	if ValidSecret(strings.Repeat("k", MaxSecretLen+1)) {
		t.Fatal("a secret of MaxSecretLen+1 bytes accepted")
	}
}
