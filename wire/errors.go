package wire

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// Error is the one error shape of every purrfly HTTP answer:
// {"code": "...", "error": "...", "retryable": bool}, with Status as the HTTP
// status. Messages never carry a stack trace, a secret or a secret's length.
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"error"`
	Retryable bool   `json:"retryable"`
	Status    int    `json:"-"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is matches errors by code, so errors.Is(err, wire.ErrRoomNotFound) holds for
// an error decoded from the network as well as for the value itself.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// WithMessage returns a copy of e with a more specific message.
func (e *Error) WithMessage(msg string) *Error {
	c := *e
	c.Message = msg
	return &c
}

func newErr(status int, code string, retryable bool, msg string) *Error {
	return &Error{Code: code, Message: msg, Retryable: retryable, Status: status}
}

// Protocol (frame) errors. They never reach HTTP; the relay counts them.
var (
	ErrEmptyPacket     = newErr(http.StatusBadRequest, "empty_packet", false, "empty packet")
	ErrTruncatedPacket = newErr(http.StatusBadRequest, "truncated_packet", false, "packet shorter than its header")
	ErrUnknownPacket   = newErr(http.StatusBadRequest, "unknown_packet", false, "unknown packet type")
	ErrEmptyPayload    = newErr(http.StatusBadRequest, "empty_payload", false, "packet with nothing to deliver")
	ErrBadMethod       = newErr(http.StatusBadRequest, "bad_method", false, "packet without a valid delivery method")
	ErrBadAuth         = newErr(http.StatusBadRequest, "bad_auth", false, "malformed authentication message")
	ErrBadSessionHint  = newErr(http.StatusBadRequest, "bad_session_hint", false, "the s query parameter must be the hex of at most 128 bytes")
)

// Request errors (4xx).
var (
	ErrBadRequest       = newErr(http.StatusBadRequest, "bad_request", false, "malformed request")
	ErrMissingHeader    = newErr(http.StatusBadRequest, "missing_header", false, "a required header is missing")
	ErrBadHeader        = newErr(http.StatusBadRequest, "bad_header", false, "a header value is malformed or too long")
	ErrBodyTooLarge     = newErr(http.StatusRequestEntityTooLarge, "body_too_large", false, "request body too large")
	ErrUnauthorized     = newErr(http.StatusUnauthorized, "unauthorized", false, "missing or wrong credential")
	ErrNotFound         = newErr(http.StatusNotFound, "not_found", false, "no such route")
	ErrMethodNotAllowed = newErr(http.StatusMethodNotAllowed, "method_not_allowed", false, "method not allowed on this route")
	ErrRoomNotFound     = newErr(http.StatusNotFound, "room_not_found", false, "no such room")
	ErrRoomTaken        = newErr(http.StatusConflict, "room_name_taken", false, "a live room already holds this name under another allocation")
	ErrAllocationBusy   = newErr(http.StatusConflict, "allocation_in_progress", true, "another allocation of this room name is in progress")
	ErrStaleBoot        = newErr(http.StatusConflict, "stale_boot", false, "this relay boot is not the one serving the endpoint")
	ErrBootNotProven    = newErr(http.StatusConflict, "boot_not_proven", true, "the endpoint does not report this boot id")
	ErrMetadataChanged  = newErr(http.StatusConflict, "metadata_changed", false, "routing metadata is immutable within a boot; restart with a new boot id")
	ErrUnknownRelay     = newErr(http.StatusConflict, "unknown_relay", true, "the balancer does not know this relay boot; register first")
	ErrHandoverRefused  = newErr(http.StatusConflict, "handover_refused", false, "the room is not this machine's to hand over (in use, not here, or not the host's secret)")
	ErrProtocolVersion  = newErr(http.StatusBadRequest, "unsupported_protocol", false, "unsupported internal protocol version")
	// ErrNoCandidate: no registered relay fits an explicit placement
	// (labels, strategy: balancer.Placement); the message says why, e.g.
	// "2 relays: 1 draining, 1 full (rooms 50/50)". PurrNet's own
	// allocations, which ask for no placement, get ErrNoRelays instead.
	ErrNoCandidate = newErr(http.StatusConflict, "no_candidate", true, "no relay fits the placement")
	// ErrInstanceDraining: a placement pinned to one relay that drains.
	ErrInstanceDraining = newErr(http.StatusConflict, "instance_draining", false, "the relay is draining: it takes no new room")
	ErrRateLimited      = newErr(http.StatusTooManyRequests, "rate_limited", true, "too many requests from this address; retry after Retry-After seconds")
	// ErrInstanceNotFound keeps the code not_found that the deploy tool
	// (rollout) matches on a drain of a relay that is gone.
	ErrInstanceNotFound = newErr(http.StatusNotFound, "not_found", false, "no such instance")
	ErrThrottled        = newErr(http.StatusTooManyRequests, "throttled", true, "too many failed authentications from this address; retry after Retry-After seconds")
	ErrTooManyStreams   = newErr(http.StatusTooManyRequests, "too_many_streams", true, "too many event streams are open; retry later")
	// ErrInstanceBusy: every relay a room could go to (or the one it is
	// pinned to) has as many allocation calls under way as the balancer
	// sends one relay at once; retry in a moment.
	ErrInstanceBusy = newErr(http.StatusTooManyRequests, "instance_busy", true, "the relay has too many allocations in flight; retry in a moment")
)

// Server-side errors (5xx).
var (
	ErrNoRelays       = newErr(http.StatusServiceUnavailable, "no_relays", true, "no relay is registered")
	ErrDraining       = newErr(http.StatusServiceUnavailable, "draining", true, "this server is draining and takes no new rooms")
	ErrRelayFull      = newErr(http.StatusServiceUnavailable, "relay_full", true, "this relay holds as many rooms as it may")
	ErrTooManyRelays  = newErr(http.StatusServiceUnavailable, "too_many_relays", true, "the balancer registers as many relays as it may; retry once one has gone")
	ErrTooManyConns   = newErr(http.StatusServiceUnavailable, "too_many_connections", true, "too many connections are waiting to authenticate; retry")
	ErrNotReady       = newErr(http.StatusServiceUnavailable, "not_ready", true, "this relay is not registered with its balancer")
	ErrRelayBadAnswer = newErr(http.StatusBadGateway, "relay_bad_answer", true, "the relay answered with an incomplete or malformed capability")
	ErrRelayFailed    = newErr(http.StatusBadGateway, "relay_unavailable", true, "the relay could not be reached")
	ErrIndeterminate  = newErr(http.StatusServiceUnavailable, "allocation_outcome_indeterminate", true, "the relay may have committed; retry with the same allocation_id")
	ErrInternal       = newErr(http.StatusInternalServerError, "internal", true, "internal error")
)

// WriteJSON writes v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header()["Content-Type"] = jsonType
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError writes err in the purrfly error shape. Anything that is not an
// *Error becomes a generic 500 whose text is not shown (it may hold details
// that must not leave the process).
func WriteError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = ErrInternal
	}
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	WriteJSON(w, status, e)
}

// DecodeError reads a purrfly error body. A body that is not one still gives an
// *Error that carries the status, with code "http_<status>".
func DecodeError(status int, body []byte) *Error {
	var e Error
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		e.Status = status
		return &e
	}
	return &Error{
		Code:      "http_" + strconv.Itoa(status),
		Message:   "unexpected answer " + http.StatusText(status),
		Retryable: status >= 500 || status == http.StatusTooManyRequests,
		Status:    status,
	}
}
