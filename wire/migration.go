package wire

import (
	"net/http"
	"strconv"
	"time"
)

// Host migration (docs/MIGRATION.md). A caller sends every migration call
// to the balancer (the public paths below), which forwards it to the relay
// that holds the room (the internal paths), with the room's route snapshot in
// internal-only headers (HeaderRoomEpoch, HeaderRoomRevision and
// HeaderTargetBoot). Request fields travel in headers, answers are JSON
// (MigrationState and the types that embed it) or the usual Error.
//
//	current    GET:  name, migration_secret (the client or the host
//	           credential) -> MigrationState. Never a credential or a
//	           claim id.
//	authorize  POST: name, migration_secret (the live host's credential),
//	           migration_claim_id, incarnation, expected_generation,
//	           promoted_player_id -> MigrationGrant.
//	claim      POST: name, migration_secret (the client credential),
//	           migration_claim_id, incarnation, expected_generation,
//	           promoted_player_id, and migration_grant while the old host
//	           is live -> MigrationClaim.
//	activate   POST: name, migration_secret (the claimed host credential),
//	           migration_claim_id, incarnation, expected_generation (the
//	           claimed generation), promoted_player_id, fencing_token ->
//	           MigrationActivation.

// Public migration paths (balancer).
const (
	PathMigrationCurrent   = "/migration/current"
	PathMigrationAuthorize = "/migration/authorize"
	PathMigrationClaim     = "/migration/claim"
	PathMigrationActivate  = "/migration/activate"
)

// Internal migration paths (balancer -> the relay holding the room).
const (
	PathRelayMigrationCurrent   = "/internal/v2/migration/current"
	PathRelayMigrationAuthorize = "/internal/v2/migration/authorize"
	PathRelayMigrationClaim     = "/internal/v2/migration/claim"
	PathRelayMigrationActivate  = "/internal/v2/migration/activate"
)

// The route snapshot the balancer forwards with a migration call (with
// HeaderTargetBoot): the relay refuses the call unless it still holds
// that incarnation and the revision is not newer than its own.
const (
	HeaderRoomEpoch    = "purr-room-epoch"
	HeaderRoomRevision = "purr-room-revision"
)

// Migration header limits.
const (
	MaxClaimIDLen     = 128
	MaxIncarnationLen = 64
	MaxFenceLen       = 64
	MaxGrantLen       = 128
)

// MigrationOp is one of the four migration calls.
type MigrationOp uint8

const (
	OpCurrent MigrationOp = iota
	OpAuthorize
	OpClaim
	OpActivate
)

var opNames = [...]string{"current", "authorize", "claim", "activate"}

func (o MigrationOp) String() string { return opNames[o] }

// Mutating reports whether the call changes state (every one but current).
func (o MigrationOp) Mutating() bool { return o != OpCurrent }

// Method is the call's HTTP method.
func (o MigrationOp) Method() string {
	if o == OpCurrent {
		return http.MethodGet
	}
	return http.MethodPost
}

// PublicPath and RelayPath are the call's paths at the balancer and at
// the relay.
func (o MigrationOp) PublicPath() string {
	return [...]string{PathMigrationCurrent, PathMigrationAuthorize, PathMigrationClaim, PathMigrationActivate}[o]
}

func (o MigrationOp) RelayPath() string {
	return [...]string{PathRelayMigrationCurrent, PathRelayMigrationAuthorize, PathRelayMigrationClaim, PathRelayMigrationActivate}[o]
}

// MigrationRequest is a migration call's headers.
type MigrationRequest struct {
	Op                 MigrationOp
	Name               string
	Secret             string // migration_secret
	ClaimID            string
	Incarnation        string
	ExpectedGeneration uint64
	PromotedPlayerID   string // canonical decimal (ParsePlayerID)
	Grant              string // claim only, optional
	FencingToken       string // activate only
}

// ParseMigrationRequest reads the headers op requires (and the optional
// grant of a claim), each bounded and checked.
func ParseMigrationRequest(r *http.Request, op MigrationOp) (MigrationRequest, error) {
	m := MigrationRequest{Op: op}
	var err error
	if m.Name, err = HeaderValue(r, HeaderName, MaxSessionIDLen); err != nil {
		return m, err
	}
	if m.Secret, err = HeaderValue(r, HeaderMigrationSecret, MaxSecretLen); err != nil {
		return m, err
	}
	if op == OpCurrent {
		return m, nil
	}
	if m.ClaimID, err = HeaderValue(r, HeaderMigrationClaimID, MaxClaimIDLen); err != nil {
		return m, err
	}
	if m.Incarnation, err = HeaderValue(r, HeaderIncarnation, MaxIncarnationLen); err != nil {
		return m, err
	}
	gen, err := HeaderValue(r, HeaderExpectedGen, 20)
	if err != nil {
		return m, err
	}
	if m.ExpectedGeneration, err = parseCanonicalUint(gen, true); err != nil {
		return m, ErrBadHeader.WithMessage("header " + HeaderExpectedGen + " must be a decimal generation")
	}
	// Present but not canonical, whatever its length or bytes, is the
	// player id's own error: a 21-digit id is a wrong id, not a malformed
	// header (ParsePlayerID reads at most 20 digits and nothing else).
	id := HeaderGet(r.Header, HeaderPromotedPlayerID)
	if id == "" {
		return m, ErrMissingHeader.WithMessage("header " + HeaderPromotedPlayerID + " is required")
	}
	if m.PromotedPlayerID, err = ParsePlayerID(id); err != nil {
		return m, err
	}
	switch op {
	case OpClaim:
		if m.Grant, err = OptionalHeader(r, HeaderMigrationGrant, MaxGrantLen); err != nil {
			return m, err
		}
	case OpActivate:
		if m.FencingToken, err = HeaderValue(r, HeaderFencingToken, MaxFenceLen); err != nil {
			return m, err
		}
	}
	return m, nil
}

// SetHeaders writes m's fields as the headers ParseMigrationRequest reads.
func (m MigrationRequest) SetHeaders(h http.Header) {
	for _, kv := range m.Pairs() {
		h.Set(kv[0], kv[1])
	}
}

// Pairs are m's headers as (name, value), names lower-case as PurrNet
// sends them.
func (m MigrationRequest) Pairs() [][2]string {
	p := [][2]string{{HeaderName, m.Name}, {HeaderMigrationSecret, m.Secret}}
	if m.Op == OpCurrent {
		return p
	}
	p = append(p, [2]string{HeaderMigrationClaimID, m.ClaimID}, [2]string{HeaderIncarnation, m.Incarnation},
		[2]string{HeaderExpectedGen, strconv.FormatUint(m.ExpectedGeneration, 10)},
		[2]string{HeaderPromotedPlayerID, m.PromotedPlayerID})
	if m.Op == OpClaim && m.Grant != "" {
		p = append(p, [2]string{HeaderMigrationGrant, m.Grant})
	}
	if m.Op == OpActivate {
		p = append(p, [2]string{HeaderFencingToken, m.FencingToken})
	}
	return p
}

// ParsePlayerID checks a promoted_player_id: the canonical invariant
// decimal of a nonzero unsigned 64-bit PurrNet player id (no sign, no
// whitespace, no leading zero), and returns it unchanged.
func ParsePlayerID(s string) (string, error) {
	if _, err := parseCanonicalUint(s, false); err != nil {
		return "", ErrBadPlayerID
	}
	return s, nil
}

// parseCanonicalUint parses the canonical decimal of a uint64: digits
// only, no leading zero (but "0" itself when zero is allowed).
func parseCanonicalUint(s string, zero bool) (uint64, error) {
	if s == "" || len(s) > 20 || (s[0] == '0' && (len(s) > 1 || !zero)) {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

// Host phases (MigrationState.HostPhase), relay-authoritative.
const (
	HostPhasePending = "pending" // a host owns the room and has not activated: wait
	HostPhaseActive  = "active"  // the host is connected and ready: connect to it
	HostPhaseExpired = "expired" // a claimed host's activation lease elapsed: claim afresh
	HostPhaseVacant  = "vacant"  // no host owns the room: claim
)

// MigrationState is the answer of current and the base of the others: the
// relay's connection fields (the balancer puts the relay's authoritative
// host in Host) and the room's migration metadata. Times are RFC 3339 in
// UTC, "" when not set.
type MigrationState struct {
	Host      string `json:"host"`
	Port      int    `json:"port"`
	UDPPort   int    `json:"udpPort"`
	UDPPortV2 int    `json:"udpPortV2"`
	SSL       bool   `json:"ssl"`

	RoomName            string `json:"roomName"`
	Incarnation         string `json:"incarnation"`
	Generation          uint64 `json:"generation"`
	FencingToken        string `json:"fencingToken"`
	PromotedPlayerID    string `json:"promotedPlayerId"`
	ClaimedAt           string `json:"claimedAt"`
	HostPhase           string `json:"hostPhase"`
	HostActive          bool   `json:"hostActive"`
	ClaimPending        bool   `json:"claimPending"`
	ActivationExpiresAt string `json:"activationExpiresAt"`
	ActivatedAt         string `json:"activatedAt"`
}

// MigrationClaim is a claim's answer: the state after the claim, the new
// host credential, the claim id, and whether it is a replay.
type MigrationClaim struct {
	MigrationState
	Secret   string `json:"secret"`
	ClaimID  string `json:"claimId"`
	Replayed bool   `json:"replayed"`
}

// Validate checks a claim answer before the balancer forwards it: a
// credential and usable ports (the boolean TLS mode is checked by its
// type).
func (c MigrationClaim) Validate() error {
	return Capability{Host: "relay", Secret: c.Secret, Port: c.Port, UDPPort: c.UDPPort, UDPPortV2: c.UDPPortV2}.Validate()
}

// MigrationActivation is activate's answer: the state (hostActive true,
// claimPending false, hostPhase active) and the claim id, which PurrNet's
// client checks against its request with roomName, incarnation,
// generation, fencingToken and promotedPlayerId.
type MigrationActivation struct {
	MigrationState
	ClaimID string `json:"claimId"`
}

// MigrationGrant is authorize's answer: a one-time grant bound to the
// claim id, the room's incarnation and generation and the promoted player.
type MigrationGrant struct {
	Grant            string `json:"grant"`
	ClaimID          string `json:"claimId"`
	Incarnation      string `json:"incarnation"`
	Generation       uint64 `json:"generation"`
	PromotedPlayerID string `json:"promotedPlayerId"`
	ExpiresAt        string `json:"expiresAt"`
}

// FormatTime is how migration answers write a time ("" for the zero time).
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Migration errors. PurrNet's client takes host_activation_expired,
// host_connection_lost, activation_fence_mismatch, incarnation_changed,
// invalid_host_credential and room_not_found as terminal for an
// activation; everything else as "may have committed, retry".
var (
	ErrBadPlayerID            = newErr(http.StatusBadRequest, "invalid_promoted_player_id", false, "promoted_player_id must be the canonical decimal of a nonzero 64-bit player id")
	ErrInvalidClientCred      = newErr(http.StatusForbidden, "invalid_client_credential", false, "migration_secret is not the room's current client credential")
	ErrInvalidHostCred        = newErr(http.StatusForbidden, "invalid_host_credential", false, "migration_secret is not the room's current host credential")
	ErrInvalidCredential      = newErr(http.StatusForbidden, "invalid_credential", false, "migration_secret is neither of the room's current credentials")
	ErrIncarnationChanged     = newErr(http.StatusConflict, "incarnation_changed", false, "the room is another incarnation now (its name was reused)")
	ErrGenerationMismatch     = newErr(http.StatusConflict, "migration_generation_mismatch", false, "expected_generation is not the room's generation; read current state")
	ErrClaimIDConflict        = newErr(http.StatusConflict, "migration_claim_id_conflict", false, "this migration_claim_id was used with other values; make a new claim id")
	ErrGrantRequired          = newErr(http.StatusConflict, "migration_grant_required", false, "the room's host is live: a claim needs a grant it authorized")
	ErrGrantInvalid           = newErr(http.StatusForbidden, "migration_grant_invalid", false, "the grant is not the host's current one for this claim, or it expired")
	ErrHostNotLive            = newErr(http.StatusConflict, "host_not_live", false, "only the room's connected, active host authorizes a handoff")
	ErrHostActivationPending  = newErr(http.StatusConflict, "host_activation_pending", true, "a host owns the room and has not activated yet; wait and read current state")
	ErrHostActivationExpired  = newErr(http.StatusConflict, "host_activation_expired", true, "the claimed host did not activate within its lease; read current state and claim again")
	ErrHostNotConnected       = newErr(http.StatusConflict, "host_not_connected", true, "the claimed host has not connected to the relay yet")
	ErrHostConnectionLost     = newErr(http.StatusConflict, "host_connection_lost", false, "the claimed host's connection was lost before it activated; the room is vacant")
	ErrActivationFence        = newErr(http.StatusConflict, "activation_fence_mismatch", false, "the activation does not match the room's current claim")
	ErrRouteChanged           = newErr(http.StatusServiceUnavailable, "room_route_changed", true, "the room's route changed while the call was forwarded; retry")
	ErrMigrationIndeterminate = newErr(http.StatusServiceUnavailable, "migration_outcome_indeterminate", true,
		"the relay may have committed; retry the exact call or read current state")
)
