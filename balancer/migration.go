package balancer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/purrfly/purrfly/wire"
)

// Host migration (wire/migration.go): the balancer forwards each call to
// the relay that owns the room, the machine that published its live
// route, with the route's snapshot (boot, epoch, revision) in internal
// headers; the relay decides and checks the snapshot before it reads or
// changes anything.
//
// A mutating call (authorize, claim, activate) holds only that room's
// route lease across the relay request, the lease every publication and
// unregister of the room takes, so no publication changes the route under
// it and other rooms, on the same relay too, stay concurrent. A health
// removal or a relay replacement swaps the relay's registration without
// the rooms' leases (it invalidates all of its routes at once); a call
// under way then still forwards the answer of the relay it asked, which
// is the process that decided. current reads the route optimistically and checks
// after the answer that it is still the same route (else it reads once
// more). A mutating request that was written and got no complete answer
// is 503 migration_outcome_indeterminate: the relay may have committed,
// and the caller retries the exact call or reads current. A success is
// checked before it is forwarded (a claim's credential and ports; the
// echoed room) and gets the relay's registered host; a malformed one is a
// sanitized, retryable 502. The relay's own migration errors pass through
// unchanged (they carry no secret); anything else it answers is 502.

// migrationPassthrough are the relay answers a caller may see as they are.
var migrationPassthrough = map[string]bool{}

func init() {
	for _, e := range []*wire.Error{wire.ErrRoomNotFound, wire.ErrBadPlayerID, wire.ErrInvalidClientCred,
		wire.ErrInvalidHostCred, wire.ErrInvalidCredential, wire.ErrIncarnationChanged, wire.ErrGenerationMismatch,
		wire.ErrClaimIDConflict, wire.ErrGrantRequired, wire.ErrGrantInvalid, wire.ErrHostNotLive,
		wire.ErrHostActivationPending, wire.ErrHostActivationExpired, wire.ErrHostNotConnected,
		wire.ErrHostConnectionLost, wire.ErrActivationFence, wire.ErrRouteChanged,
		wire.ErrMissingHeader, wire.ErrBadHeader} {
		migrationPassthrough[e.Code] = true
	}
}

// handleMigration serves one public migration call.
func (s *Server) handleMigration(op wire.MigrationOp) wire.Handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		req, err := wire.ParseMigrationRequest(r, op)
		if err != nil {
			return s.migrationDone(op, err)
		}
		call := func(rec *roomRecord) (any, error) { return s.migrateOn(r.Context(), rec, req) }
		var out any
		if op.Mutating() {
			out, err = s.st.withRoute(r.Context(), req.Name, call) // the route is fixed until the relay answers
		} else {
			out, err = s.st.onRoute(req.Name, call) // optimistic, checked after the answer
		}
		if err != nil {
			return s.migrationDone(op, s.unsettled(err))
		}
		s.metrics.migrations.WithLabelValues(op.String(), "ok").Inc()
		wire.WriteJSON(w, http.StatusOK, out)
		return nil
	}
}

// migrationDone counts a failed call by its code and returns err.
func (s *Server) migrationDone(op wire.MigrationOp, err error) error {
	var we *wire.Error
	if !errors.As(err, &we) {
		we = wire.ErrInternal
	}
	s.metrics.migrations.WithLabelValues(op.String(), we.Code).Inc()
	return we
}

// migrateOn makes the call at rec's relay and checks its answer.
func (s *Server) migrateOn(ctx context.Context, rec *roomRecord, req wire.MigrationRequest) (any, error) {
	info := rec.relay.info
	start := s.clock.Now()
	// No Idempotency-Key: the transport must not retry a change on its
	// own, or a written first attempt could hide behind a retry that failed
	// to dial (the caller retries the exact call instead).
	body, err := s.relays.call(ctx, req.Op.Method(), relayURL(info.Endpoint, req.Op.RelayPath()), false, func(h http.Header) {
		h.Set(wire.HeaderTargetBoot, info.BootID)
		h.Set(wire.HeaderRoomEpoch, rec.epoch)
		h.Set(wire.HeaderRoomRevision, strconv.FormatUint(rec.revision, 10))
		req.SetHeaders(h)
	})
	s.metrics.relayCall.WithLabelValues("migration_" + req.Op.String()).Observe(s.clock.Now().Sub(start).Seconds())
	var we *wire.Error
	switch {
	case err == nil:
	case errors.Is(err, errOutcomeUnknown) && req.Op.Mutating():
		s.log.Warn("relay migration outcome unknown", "op", req.Op.String(), "room", req.Name, "endpoint", info.Endpoint)
		return nil, wire.ErrMigrationIndeterminate
	case errors.Is(err, errOutcomeUnknown), errors.Is(err, errNotDelivered):
		return nil, wire.ErrRelayFailed
	case errors.As(err, &we) && we.Code == wire.ErrStaleBoot.Code:
		return nil, wire.ErrRouteChanged // the machine runs another boot now
	case errors.As(err, &we) && migrationPassthrough[we.Code]:
		return nil, we
	default:
		s.log.Warn("relay answered a migration call unexpectedly", "op", req.Op.String(), "room", req.Name, "err", err)
		return nil, wire.ErrRelayBadAnswer.WithMessage("the relay answered the migration call unexpectedly")
	}
	return s.checkMigrationAnswer(req, body, info.Host)
}

// errBadMigrationAnswer is the sanitized 502 of a malformed relay answer.
var errBadMigrationAnswer = wire.ErrRelayBadAnswer.WithMessage("the relay answered an incomplete migration capability")

// checkMigrationAnswer decodes the relay's answer to req, checks it, and
// puts host (the relay's registered host) in its connection fields.
func (s *Server) checkMigrationAnswer(req wire.MigrationRequest, body []byte, host string) (any, error) {
	bad := func() (any, error) {
		s.log.Warn("relay answered a malformed migration answer", "op", req.Op.String(), "room", req.Name)
		return nil, errBadMigrationAnswer
	}
	state := func(st *wire.MigrationState) bool {
		st.Host = host
		return st.RoomName == req.Name && st.Incarnation != "" && st.HostPhase != ""
	}
	switch req.Op {
	case wire.OpCurrent:
		var st wire.MigrationState
		if json.Unmarshal(body, &st) != nil || !state(&st) {
			return bad()
		}
		return st, nil
	case wire.OpAuthorize:
		var g wire.MigrationGrant
		if json.Unmarshal(body, &g) != nil || g.Grant == "" || g.ClaimID != req.ClaimID || g.ExpiresAt == "" {
			return bad()
		}
		return g, nil
	case wire.OpClaim:
		var c wire.MigrationClaim
		var tls struct {
			SSL *bool `json:"ssl"` // the boolean TLS mode must be there, not just default to false
		}
		if json.Unmarshal(body, &c) != nil || json.Unmarshal(body, &tls) != nil || tls.SSL == nil || !state(&c.MigrationState) ||
			c.ClaimID != req.ClaimID || c.Generation == 0 || c.FencingToken == "" || c.Validate() != nil {
			return bad()
		}
		return c, nil
	default:
		var a wire.MigrationActivation
		if json.Unmarshal(body, &a) != nil || !state(&a.MigrationState) || a.ClaimID != req.ClaimID {
			return bad()
		}
		return a, nil
	}
}
