package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// Host migration calls (wire/migration.go), as a PurrNet session's
// orchestrator makes them through the balancer (docs/MIGRATION.md). The
// retry rules: a caller makes one claim id per migration attempt and sends the
// exact same request on every retry (an exact claim, authorization or
// activation retry is idempotent at the relay, and the balancer's
// migration_outcome_indeterminate means "may have committed": retry the
// same request or read current). A claim replay after the claimed host's
// lease ran out answers host_activation_expired: read current and make a
// fresh claim id against its generation.

// NewClaimID returns a fresh opaque claim id for one migration attempt.
func NewClaimID() string { return randHex(16) }

// MigrationCurrent reads the room's migration state with the client or
// the host credential (GET /migration/current). It never holds a
// credential.
func (b *Balancer) MigrationCurrent(ctx context.Context, name, secret string) (wire.MigrationState, error) {
	var st wire.MigrationState
	err := b.migration(ctx, wire.MigrationRequest{Op: wire.OpCurrent, Name: name, Secret: secret}, &st)
	return st, err
}

// Authorize creates the live host's one-time grant for one claim (POST
// /migration/authorize; req.Secret is the host credential).
func (b *Balancer) Authorize(ctx context.Context, req wire.MigrationRequest) (wire.MigrationGrant, error) {
	req.Op = wire.OpAuthorize
	var g wire.MigrationGrant
	err := b.migration(ctx, req, &g)
	return g, err
}

// Claim moves the room to the next generation with req.PromotedPlayerID
// as its host (POST /migration/claim; req.Secret is the client
// credential, req.Grant the live host's grant for a graceful handoff).
// The answer holds the new host credential.
func (b *Balancer) Claim(ctx context.Context, req wire.MigrationRequest) (wire.MigrationClaim, error) {
	req.Op = wire.OpClaim
	var c wire.MigrationClaim
	if err := b.migration(ctx, req, &c); err != nil {
		return c, err
	}
	if c.Secret == "" || c.ClaimID != req.ClaimID || c.Generation != req.ExpectedGeneration+1 {
		return c, fmt.Errorf("failed to claim: %w", ErrBadMigrationAnswer)
	}
	return c, nil
}

// Activate tells the relay the promoted host is ready (POST
// /migration/activate; req.Secret is the claimed host credential, with
// its generation and fencing token). The answer is checked as PurrNet's
// client checks it (ValidateActivation).
func (b *Balancer) Activate(ctx context.Context, req wire.MigrationRequest) (wire.MigrationActivation, error) {
	req.Op = wire.OpActivate
	var a wire.MigrationActivation
	if err := b.migration(ctx, req, &a); err != nil {
		return a, err
	}
	if err := ValidateActivation(req, a); err != nil {
		return a, fmt.Errorf("failed to activate: %w", err)
	}
	return a, nil
}

// ErrBadMigrationAnswer: a 200 answer that does not match the request.
// PurrNet treats it as "may have committed" and retries.
var ErrBadMigrationAnswer = errors.New("the migration answer does not match the request")

// ValidateActivation checks an activation answer as PurrNet's client does
// (docs/MIGRATION.md section 1): hostActive, not claimPending, hostPhase
// "active", and roomName, incarnation, generation, fencingToken,
// promotedPlayerId and claimId equal to the request.
func ValidateActivation(req wire.MigrationRequest, a wire.MigrationActivation) error {
	if !a.HostActive || a.ClaimPending || a.HostPhase != wire.HostPhaseActive || a.RoomName != req.Name ||
		a.Incarnation != req.Incarnation || a.Generation != req.ExpectedGeneration || a.FencingToken != req.FencingToken ||
		a.PromotedPlayerID != req.PromotedPlayerID || a.ClaimID != req.ClaimID {
		return ErrBadMigrationAnswer
	}
	return nil
}

// ActivationTerminal reports whether an activation error can never turn
// into success, as PurrNet's client decides (room_not_found only while no
// earlier attempt may have committed, which the caller knows).
func ActivationTerminal(err error) bool {
	for _, e := range []*wire.Error{wire.ErrHostActivationExpired, wire.ErrHostConnectionLost, wire.ErrActivationFence,
		wire.ErrIncarnationChanged, wire.ErrInvalidHostCred} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ActivationRetryDelay is PurrNet's pause between activation attempts.
const ActivationRetryDelay = 250 * time.Millisecond

// ActivateUntil repeats the exact activation until it succeeds, a
// terminal error comes (ActivationTerminal, or room_not_found before any
// attempt may have committed), or ctx ends, ActivationRetryDelay apart,
// as PurrNet's ActivatePreparedHostMigrationAsync does. clk may be nil.
func (b *Balancer) ActivateUntil(ctx context.Context, clk clock.Clock, req wire.MigrationRequest) (wire.MigrationActivation, error) {
	dispatched := false
	for {
		a, err := b.Activate(ctx, req)
		if err == nil {
			return a, nil
		}
		if ActivationTerminal(err) || errors.Is(err, wire.ErrRoomNotFound) && !dispatched {
			return a, err
		}
		dispatched = true
		if serr := clock.Sleep(ctx, clk, ActivationRetryDelay); serr != nil {
			return a, fmt.Errorf("activation indeterminate: %w (last error: %w)", serr, err)
		}
	}
}

// migration makes one call and decodes a success into out.
func (b *Balancer) migration(ctx context.Context, req wire.MigrationRequest, out any) error {
	if err := b.do(ctx, req.Op.Method(), b.route(req.Op.PublicPath()[1:]), req.Pairs(), out); err != nil {
		return fmt.Errorf("failed to %s: %w", req.Op, err)
	}
	return nil
}

// PromotedCapability is the relay capability a claim answer gives the
// promoted player for its host connection.
func PromotedCapability(c wire.MigrationClaim) wire.Capability {
	return wire.Capability{Host: c.Host, Secret: c.Secret, Port: c.Port, UDPPort: c.UDPPort, UDPPortV2: c.UDPPortV2, SSL: c.SSL}
}

// ActivationRequest is the activation of what claim c committed.
func ActivationRequest(name string, c wire.MigrationClaim) wire.MigrationRequest {
	return wire.MigrationRequest{Op: wire.OpActivate, Name: name, Secret: c.Secret, ClaimID: c.ClaimID,
		Incarnation: c.Incarnation, ExpectedGeneration: c.Generation, PromotedPlayerID: c.PromotedPlayerID,
		FencingToken: c.FencingToken}
}
