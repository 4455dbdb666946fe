package wire

import (
	"net/http"
	"net/textproto"
)

// Header names as net/http stores them. PurrNet's names are lower-case
// with underscores (name, allocation_id), and net/http canonicalizes a
// name on every Get and Set (textproto.CanonicalMIMEHeaderKey: "name" is
// stored as "Name"), allocating the canonical string each time for a
// name not already in that form. The names of this package are
// canonicalized once, here, so reading and setting them allocates
// nothing for the key: three to five times per request on the
// balancer's allocation path.
var headerKeys = func() map[string]string {
	m := make(map[string]string)
	for _, n := range []string{
		HeaderRegion, HeaderName, HeaderAllocationID,
		HeaderMigrationSecret, HeaderMigrationClaimID, HeaderMigrationGrant, HeaderIncarnation,
		HeaderExpectedGen, HeaderPromotedPlayerID, HeaderFencingToken,
		HeaderInternalSecret, HeaderInternalVersion,
		HeaderFlyReplay, HeaderFlyReplaySrc, HeaderFlyForceInstance, HeaderFlyPreferInstance, HeaderFlyClientIP, HeaderFlyForwardedPort,
		HeaderTargetBoot, HeaderForwardedBy, HeaderRoomEpoch, HeaderRoomRevision, HeaderLinkFraming,
		"Idempotency-Key",
	} {
		m[n] = textproto.CanonicalMIMEHeaderKey(n)
	}
	return m
}()

// CanonicalKey is textproto.CanonicalMIMEHeaderKey(name), the key
// net/http keeps name's values under, without an allocation for the
// header names of this package.
func CanonicalKey(name string) string {
	if k, ok := headerKeys[name]; ok {
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// HeaderGet is h.Get(name): the first value of name, or "".
func HeaderGet(h http.Header, name string) string {
	if v := h[CanonicalKey(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// SetHeaders is h.Set(name, value) for each pair of kv (name, value,
// name, value, ...), with the values in one allocation: each key gets a
// one-element slice of a shared array, capped at its length, so that an
// Add to one of them copies it instead of writing over its neighbour.
func SetHeaders(h http.Header, kv ...string) {
	vals := make([]string, len(kv)/2)
	for i := range vals {
		v := vals[i : i+1 : i+1]
		v[0] = kv[2*i+1]
		h[CanonicalKey(kv[2*i])] = v
	}
}
