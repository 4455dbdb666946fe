package wire

import (
	"net/http"
	"strings"
	"unicode/utf8"
)

// Header names of the public API (as PurrNet sends them: lower-case, with
// underscores, which Go's net/http keeps as-is).
const (
	HeaderRegion       = "region"
	HeaderName         = "name"
	HeaderAllocationID = "allocation_id"

	HeaderMigrationSecret  = "migration_secret"
	HeaderMigrationClaimID = "migration_claim_id"
	HeaderMigrationGrant   = "migration_grant"
	HeaderIncarnation      = "incarnation"
	HeaderExpectedGen      = "expected_generation"
	HeaderPromotedPlayerID = "promoted_player_id"
	HeaderFencingToken     = "fencing_token"
)

// Header names of the internal relay<->balancer protocol.
const (
	// HeaderInternalSecret carries the shared SECRET (the original services'
	// name, kept so operators need not reconfigure).
	HeaderInternalSecret = "internal_key_secret"
	// HeaderInternalVersion carries InternalProtocolVersion on every internal
	// request and answer.
	HeaderInternalVersion = "purr-internal-version"
)

// Fly.io headers.
const (
	HeaderFlyReplay        = "Fly-Replay"
	HeaderFlyReplaySrc     = "Fly-Replay-Src"
	HeaderFlyForceInstance = "fly-force-instance-id"
	// HeaderFlyPreferInstance asks the proxy for one machine when it is
	// routable (checks passing), else any.
	HeaderFlyPreferInstance = "fly-prefer-instance-id"
	HeaderFlyClientIP       = "Fly-Client-IP"
	HeaderFlyForwardedPort  = "Fly-Forwarded-Port"
)

// Limits on what a request may carry.
const (
	MaxHeaderValueLen  = 256      // any single header value we read
	MaxHeaderBytes     = 16 << 10 // request line and headers: Common refuses more (431); also http.Server.MaxHeaderBytes, net/http's looser backstop
	MaxBodySize        = 1 << 20  // any JSON request body
	MaxRegionLen       = 64
	MaxAllocationIDLen = 128
)

// HeaderValue reads a header that must be present and non-empty, at most
// max bytes long, valid UTF-8, without control characters (a tab
// included). Spaces and UTF-8 are allowed: a room name is a game's to
// choose. (Secrets are stricter: ValidSecret.)
func HeaderValue(r *http.Request, name string, max int) (string, error) {
	v := HeaderGet(r.Header, name)
	if v == "" {
		return "", ErrMissingHeader.WithMessage("header " + name + " is required")
	}
	return v, checkHeader(name, v, max)
}

// OptionalHeader reads a header that may be absent, with the same limits.
func OptionalHeader(r *http.Request, name string, max int) (string, error) {
	v := HeaderGet(r.Header, name)
	return strings.TrimSpace(v), checkHeader(name, v, max)
}

func checkHeader(name, v string, max int) error {
	if len(v) > max {
		return ErrBadHeader.WithMessage("header " + name + " is too long")
	}
	for i := 0; i < len(v); i++ {
		if v[i] < ' ' || v[i] == 0x7f {
			return ErrBadHeader.WithMessage("header " + name + " holds a control character")
		}
	}
	// Every value we read ends up in JSON (a room's publication, an
	// answer), which cannot carry invalid UTF-8: a room named "\x91" was
	// created by the relay and published as "\ufffd", another name, so the
	// balancer refused the relay's answer and the room was unreachable
	// (FuzzInternalRequests in relay/).
	if !utf8.ValidString(v) {
		return ErrBadHeader.WithMessage("header " + name + " is not valid UTF-8")
	}
	return nil
}

// ValidSecret reports whether s can serve as the shared SECRET: non-empty,
// printable ASCII without spaces, at most MaxSecretLen bytes.
func ValidSecret(s string) bool {
	if s == "" || len(s) > MaxSecretLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
