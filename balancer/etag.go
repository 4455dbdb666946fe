package balancer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/purrfly/purrfly/wire"
)

// Bounds of If-None-Match: a longer header, or more tags, is ignored (the
// answer is then a plain 200).
const (
	maxIfNoneMatchLen  = 2048
	maxIfNoneMatchTags = 32
)

// etagOf is the weak ETag of a semantic view: W/"<16 hex of SHA-256 of its
// JSON>". Callers pass the state without heartbeat timestamps, so a quiet
// fleet keeps its ETag. Weak: two answers with one ETag may differ in
// those timestamps.
func etagOf(semantic any) string {
	b, _ := json.Marshal(semantic)
	h := sha256.Sum256(b)
	return `W/"` + hex.EncodeToString(h[:8]) + `"`
}

// parseIfNoneMatch reads an If-None-Match value: "*" or a comma-separated
// list of entity tags, each "..." or W/"..." (the opaque part without
// quotes, backslashes or controls, RFC 9110). ok is false for a malformed
// or oversized header, which is then ignored.
func parseIfNoneMatch(v string) (tags []string, any bool, ok bool) {
	if len(v) > maxIfNoneMatchLen {
		return nil, false, false
	}
	v = strings.TrimSpace(v)
	if v == "*" {
		return nil, true, true
	}
	for v != "" {
		tag := strings.TrimPrefix(v, "W/")
		if len(tag) < 2 || tag[0] != '"' {
			return nil, false, false
		}
		end := strings.IndexByte(tag[1:], '"')
		if end < 0 {
			return nil, false, false
		}
		opaque := tag[1 : 1+end]
		for i := 0; i < len(opaque); i++ {
			if c := opaque[i]; c < 0x21 || c == 0x7f || c == '\\' {
				return nil, false, false
			}
		}
		if len(tags) == maxIfNoneMatchTags {
			return nil, false, false
		}
		tags = append(tags, opaque)
		v = strings.TrimLeft(tag[2+end:], " \t")
		if v == "" {
			break
		}
		if v[0] != ',' {
			return nil, false, false
		}
		v = strings.TrimLeft(v[1:], " \t")
	}
	if len(tags) == 0 {
		return nil, false, false
	}
	return tags, false, true
}

// notModified reports whether r's If-None-Match matches etag (weak
// comparison: W/ is ignored on both sides).
func notModified(r *http.Request, etag string) bool {
	v := r.Header.Get("If-None-Match")
	if v == "" {
		return false
	}
	tags, star, ok := parseIfNoneMatch(v)
	if !ok {
		return false
	}
	if star {
		return true
	}
	own := strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	for _, t := range tags {
		if t == own {
			return true
		}
	}
	return false
}

// writeTagged answers body with the ETag of semantic, or 304 Not Modified
// without a body when the request already holds it.
func writeTagged(w http.ResponseWriter, r *http.Request, body, semantic any) error {
	etag := etagOf(semantic)
	w.Header().Set("ETag", etag)
	if notModified(r, etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	wire.WriteJSON(w, http.StatusOK, body)
	return nil
}
