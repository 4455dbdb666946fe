package wstransport

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/purrfly/purrfly/wire"
)

// ErrUpgradeRequired answers a request that is no WebSocket upgrade where
// only upgrades are served.
var ErrUpgradeRequired = &wire.Error{Code: "upgrade_required", Message: "this port only takes WebSocket upgrades",
	Status: http.StatusUpgradeRequired}

// IsUpgrade reports whether r asks for a WebSocket.
func IsUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// errBadHandshake answers an upgrade request coder/websocket would refuse
// in plain text.
var errBadHandshake = &wire.Error{Code: "bad_websocket_handshake", Status: http.StatusBadRequest,
	Message: "a WebSocket upgrade is a GET over HTTP/1.1 with Connection: Upgrade, Upgrade: websocket and a Sec-WebSocket-Key"}

// errWSVersion answers an upgrade of another WebSocket version.
var errWSVersion = &wire.Error{Code: "unsupported_websocket_version", Status: http.StatusUpgradeRequired,
	Message: "only WebSocket version 13 is served"}

// checkHandshake checks an upgrade request as coder/websocket's Accept
// does, so that a bad one gets a JSON answer instead of the library's
// plain text.
func checkHandshake(w http.ResponseWriter, r *http.Request) error {
	switch {
	case r.Method != http.MethodGet || !r.ProtoAtLeast(1, 1) || !headerHasToken(r.Header, "Connection", "upgrade") ||
		!headerHasToken(r.Header, "Upgrade", "websocket") || !validWSKey(r.Header):
		return errBadHandshake
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		w.Header().Set("Sec-WebSocket-Version", "13")
		return errWSVersion
	}
	return nil
}

// validWSKey reports whether the request carries exactly one
// Sec-WebSocket-Key, the base64 of 16 bytes once trimmed, as
// coder/websocket requires (FuzzCheckHandshake holds the two together).
func validWSKey(h http.Header) bool {
	keys := h.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return false
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0]))
	return err == nil && len(k) == 16
}

// headerHasToken reports whether a comma-separated header holds token
// (case-insensitively).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
