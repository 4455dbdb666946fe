package balancer

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/purrfly/purrfly/internal/randid"
	"github.com/purrfly/purrfly/wire"
)

// Admin key rules (Options.AdminKeys).
const (
	// MinAdminKeyLen is the shortest admin key accepted.
	MinAdminKeyLen = 16
	// GoodAdminKeyLen is the length under which a key is warned about.
	GoodAdminKeyLen = 32
	// maxAuthHeaderLen bounds the Authorization header read ("Bearer " and
	// a key of at most wire.MaxSecretLen).
	maxAuthHeaderLen = 7 + 8 + wire.MaxSecretLen
)

// checkAdminKeys enforces the key rules; it never names a key in its
// error, only its position in the list.
func checkAdminKeys(keys []string, secret string, require bool) error {
	if len(keys) == 0 && require {
		return errors.New("ADMIN_KEY is required on Fly (the /v1 admin API's key; comma-separated for rotation)")
	}
	for i, k := range keys {
		switch {
		case !wire.ValidSecret(k):
			return fmt.Errorf("admin key %d must be printable ASCII without spaces, at most %d bytes", i+1, wire.MaxSecretLen)
		case len(k) < MinAdminKeyLen:
			return fmt.Errorf("admin key %d is shorter than %d characters", i+1, MinAdminKeyLen)
		case wire.SecretIn(k, secret):
			return fmt.Errorf("admin key %d equals the relay SECRET (one of its values): the operator's key must be its own", i+1)
		}
	}
	return nil
}

// ParseAdminKeys splits ADMIN_KEY's comma-separated list, dropping empty
// items and surrounding spaces.
func ParseAdminKeys(v string) []string {
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// generateAdminKey is a random 32-byte key, hex (64 characters).
func generateAdminKey() string { return randid.Hex(32) }

// Fingerprint names a key in logs: the first 8 hex digits of its SHA-256.
func Fingerprint(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:4])
}

// adminKeys are the accepted admin keys. Static after New.
type adminKeys struct {
	hashes [][sha256.Size]byte
	fps    []string
}

func newAdminKeys(keys []string) adminKeys {
	k := adminKeys{hashes: make([][sha256.Size]byte, len(keys)), fps: make([]string, len(keys))}
	for i, key := range keys {
		k.hashes[i] = sha256.Sum256([]byte(key))
		k.fps[i] = Fingerprint(key)
	}
	return k
}

// match compares got with every key in constant time (all of them, always:
// neither which key nor how many keys shows in the timing) and returns the
// matching key's fingerprint.
func (k adminKeys) match(got string) (string, bool) {
	h := sha256.Sum256([]byte(got))
	found := -1
	for i := range k.hashes {
		if subtle.ConstantTimeCompare(h[:], k.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return k.fps[found], true
}

// parseBearer reads "Bearer <token>" (the scheme in any case, one or more
// spaces, a token that is wire.ValidSecret). Anything else is not a
// credential.
func parseBearer(h string) (string, bool) {
	if len(h) > maxAuthHeaderLen || len(h) < 8 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	tok := strings.TrimLeft(h[7:], " ")
	if !wire.ValidSecret(tok) {
		return "", false
	}
	return tok, true
}

// credential identifies who authenticated, for the audit log: "admin#<fp>"
// or, on the deploy tool's routes, "secret" (there is one shared secret,
// and the fingerprint of a short one could be checked against a word
// list); never key material.
type credential string

// credSecret is the shared SECRET's credential.
const credSecret credential = "secret"

// adminCredential is the credential of the admin key of fingerprint fp.
func adminCredential(fp string) credential { return credential("admin#" + fp) }

// credentials are the configured keys' credentials, in their order.
func (k adminKeys) credentials() []credential {
	out := make([]credential, len(k.fps))
	for i, fp := range k.fps {
		out[i] = adminCredential(fp)
	}
	return out
}

// authenticate checks r's credential for a /v1 route: an admin key as a
// Bearer token (or ?key= on the event stream when Options.SSEQueryKey),
// or, where legacySecret, the shared SECRET as the deploy tool sends it
// (wire.CheckOperator). Every failure is the same.
func (s *Server) authenticate(r *http.Request, legacySecret, queryKey bool) (credential, bool) {
	tok, ok := parseBearer(r.Header.Get("Authorization"))
	if !ok && queryKey && s.opts.SSEQueryKey && r.Header.Get("Authorization") == "" {
		if q := r.URL.Query()["key"]; len(q) == 1 && wire.ValidSecret(q[0]) {
			tok, ok = q[0], true
		}
	}
	if ok {
		if fp, good := s.adminKeys.match(tok); good {
			return adminCredential(fp), true
		}
	}
	if legacySecret && wire.CheckOperator(r, s.opts.Secret) == nil {
		return credSecret, true
	}
	return "", false
}
