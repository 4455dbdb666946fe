package core

import (
	"time"

	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// Host migration, as the seed specifies it (wire/migration.go lists the
// calls). A room incarnation is one game session: its incarnation id is
// new for every allocation (and every reuse of the name), its generation
// starts at 0 and grows by one with every claim. The client credential is
// the session's membership and never changes within the incarnation; the
// host credential rotates with every claim and is single-activation (the
// first host socket that authenticates with it spends it, so no second
// host connection can ever use it). A claim also rotates the fencing
// token, records the promoted player and starts the activation lease,
// and closes every socket of the old generation, so that even a peer that
// missed the game's own COMMIT message observes host loss and recovers.
//
// Everything below runs under the room's lock, and every call reads the
// phase through the room's phase machine (the lease is checked against the
// injected clock, never a timer), after checking the balancer's route snapshot:
// the incarnation the balancer routed to (epoch) must be this one and its
// revision must not be newer than ours (a locally newer count is benign).
//
// During the lease the promoted host's socket is provisional (phase
// pending, room.host set) and the room is a closed lane: only the promoted
// player's own listen-client (the one that authenticates with
// provisionalHostSecret equal to the claimed host credential, at most one)
// talks to it; every other client that joins is isolated (authenticated,
// not announced to the host, its packets dropped) and is closed at
// activation, to reconnect through the normal path to the active host.

// migState is a room incarnation's migration state; guarded by room.mu.
type migState struct {
	generation uint64
	fence      string      // the current generation's fencing token
	promoted   string      // the player the last claim promoted ("" at generation 0)
	claim      claimRecord // the claim that made this generation (zero at 0)
	claimedAt  time.Time
	hostUsed   bool     // a host socket spent the current host credential
	grant      migGrant // the live host's current grant (zero: none)
	// claims are the incarnation's committed claims, oldest first (at
	// most maxClaimHistory): a claim id is never reused for another tuple.
	claims []claimRecord
	// isolated are the clients that joined during the lease (pending or
	// expired), apart from the lane; lane is the promoted player's own
	// listen-client, which is also in room.clients.
	isolated map[wire.ConnID]*Conn
	lane     *Conn
}

// maxClaimHistory bounds the claims an incarnation remembers (a session
// that migrates more often than this in its life is beyond any game).
const maxClaimHistory = 64

// claimByID returns the committed claim with id.
func (m *migState) claimByID(id string) (claimRecord, bool) {
	for _, c := range m.claims {
		if c.id == id {
			return c, true
		}
	}
	return claimRecord{}, false
}

// committed records a claim.
func (m *migState) committed(rec claimRecord) {
	if len(m.claims) == maxClaimHistory {
		m.claims = append(m.claims[:0], m.claims[1:]...)
	}
	m.claims = append(m.claims, rec)
	m.claim = rec
}

// claimRecord is what a claim (or a grant) is bound to.
type claimRecord struct {
	id, incarnation, promoted string
	from                      uint64 // the generation it claimed from
}

func recordOf(req wire.MigrationRequest) claimRecord {
	return claimRecord{id: req.ClaimID, incarnation: req.Incarnation, promoted: req.PromotedPlayerID, from: req.ExpectedGeneration}
}

// migGrant is a one-time grant the live host created for one claim.
type migGrant struct {
	token   string
	claim   claimRecord
	expires time.Time
}

// Route is the balancer's snapshot of a room's route.
type Route struct {
	Epoch    string
	Revision uint64
}

// migrationRoom returns the live room name, locked, after
// checking the route snapshot. The caller unlocks.
func (c *Core) migrationRoom(name string, rt Route) (*Room, time.Time, error) {
	r := c.rooms.get(name)
	if r == nil {
		return nil, time.Time{}, wire.ErrRoomNotFound
	}
	r.mu.Lock()
	now := c.clock.Now()
	switch {
	case !r.liveLocked():
		r.mu.Unlock()
		return nil, now, wire.ErrRoomNotFound
	case rt.Epoch != r.epoch || rt.Revision > r.revision:
		r.mu.Unlock()
		return nil, now, wire.ErrRouteChanged
	}
	return r, now, nil
}

// stateLocked is the room's migration metadata (no connection fields).
func (r *Room) stateLocked() wire.MigrationState {
	m := &r.mig
	ph := r.phaseLocked()
	s := wire.MigrationState{
		RoomName:         r.name,
		Incarnation:      r.incarnation,
		Generation:       m.generation,
		FencingToken:     m.fence,
		PromotedPlayerID: m.promoted,
		ClaimedAt:        wire.FormatTime(m.claimedAt),
		HostPhase:        hostPhase(ph),
		HostActive:       ph == phase.Hosted,
		ClaimPending:     ph == phase.Pending,
		ActivatedAt:      wire.FormatTime(r.life.ActivatedAt()),
	}
	if ph == phase.Pending {
		s.ActivationExpiresAt = wire.FormatTime(r.life.LeaseUntil())
	}
	return s
}

// MigrationCurrent answers /migration/current: metadata for a holder of
// the client or the host credential.
func (c *Core) MigrationCurrent(req wire.MigrationRequest, rt Route) (wire.MigrationState, error) {
	r, _, err := c.migrationRoom(req.Name, rt)
	if err != nil {
		return wire.MigrationState{}, err
	}
	defer r.mu.Unlock()
	if !wire.SecretEqual(req.Secret, r.clientSecret) && !wire.SecretEqual(req.Secret, r.hostSecret) {
		return wire.MigrationState{}, wire.ErrInvalidCredential
	}
	return r.stateLocked(), nil
}

// checkTupleLocked checks a claim tuple against the room: incarnation,
// then generation.
func (r *Room) checkTupleLocked(req wire.MigrationRequest) error {
	switch {
	case req.Incarnation != r.incarnation:
		return wire.ErrIncarnationChanged
	case req.ExpectedGeneration != r.mig.generation:
		return wire.ErrGenerationMismatch
	}
	return nil
}

// Authorize answers /migration/authorize: the live host creates a
// one-time grant for one claim. The exact retry of an unexpired grant
// answers the same grant and expiry; anything else replaces it.
func (c *Core) Authorize(req wire.MigrationRequest, rt Route) (wire.MigrationGrant, error) {
	r, now, err := c.migrationRoom(req.Name, rt)
	if err != nil {
		return wire.MigrationGrant{}, err
	}
	defer r.mu.Unlock()
	switch {
	case !wire.SecretEqual(req.Secret, r.hostSecret):
		return wire.MigrationGrant{}, wire.ErrInvalidHostCred
	case r.phaseLocked() != phase.Hosted:
		return wire.MigrationGrant{}, wire.ErrHostNotLive
	}
	if err := r.checkTupleLocked(req); err != nil {
		return wire.MigrationGrant{}, err
	}
	g := &r.mig.grant
	if rec := recordOf(req); g.token == "" || g.claim != rec || !now.Before(g.expires) {
		*g = migGrant{token: randomHex(16), claim: rec, expires: now.Add(c.grantLifetime)}
	}
	return wire.MigrationGrant{
		Grant:            g.token,
		ClaimID:          g.claim.id,
		Incarnation:      r.incarnation,
		Generation:       r.mig.generation,
		PromotedPlayerID: g.claim.promoted,
		ExpiresAt:        wire.FormatTime(g.expires),
	}, nil
}

// Claim answers /migration/claim (see the package comment above and the
// seed): the client credential and the exact tuple; a grant while the
// host is live. It returns the answer without the connection fields.
func (c *Core) Claim(req wire.MigrationRequest, rt Route) (wire.MigrationClaim, error) {
	r, now, err := c.migrationRoom(req.Name, rt)
	if err != nil {
		return wire.MigrationClaim{}, err
	}
	defer r.mu.Unlock()
	if !wire.SecretEqual(req.Secret, r.clientSecret) {
		return wire.MigrationClaim{}, wire.ErrInvalidClientCred
	}
	m := &r.mig
	rec := recordOf(req)
	if prev, ok := m.claimByID(rec.id); ok {
		switch {
		case prev != rec:
			return wire.MigrationClaim{}, wire.ErrClaimIDConflict // a claim id is one attempt's
		case prev != m.claim:
			return wire.MigrationClaim{}, wire.ErrGenerationMismatch // an older attempt, superseded
		case r.phaseLocked() == phase.Pending || !r.life.ActivatedAt().IsZero():
			return r.claimAnswerLocked(rec, true), nil // the exact retry of the claim that made this generation
		}
		return wire.MigrationClaim{}, wire.ErrHostActivationExpired
	}
	if err := r.checkTupleLocked(req); err != nil {
		return wire.MigrationClaim{}, err
	}
	if !r.claimableLocked() {
		return wire.MigrationClaim{}, wire.ErrHostActivationPending
	}
	if r.phaseLocked() == phase.Hosted {
		// The old host is live: only its grant for exactly this claim.
		g := m.grant
		switch {
		case req.Grant == "":
			return wire.MigrationClaim{}, wire.ErrGrantRequired
		case g.token == "" || !wire.SecretEqual(req.Grant, g.token) || g.claim != rec || !now.Before(g.expires):
			return wire.MigrationClaim{}, wire.ErrGrantInvalid
		}
	}
	// Commit: the next generation, its credential and fence, the lease,
	// and every old-generation socket closed.
	old := r.takeConnsLocked()
	m.generation++
	r.hostSecret = randomHex(16)
	m.fence = randomHex(16)
	m.promoted = rec.promoted
	m.committed(rec)
	m.claimedAt = now
	m.hostUsed = false
	m.grant = migGrant{}
	r.claimedLocked(now.Add(c.activationLease))
	for _, cn := range old {
		cn.Close(ReasonMigrated)
	}
	r.changedLocked(c)
	return r.claimAnswerLocked(rec, false), nil
}

func (r *Room) claimAnswerLocked(rec claimRecord, replayed bool) wire.MigrationClaim {
	return wire.MigrationClaim{MigrationState: r.stateLocked(), Secret: r.hostSecret, ClaimID: rec.id, Replayed: replayed}
}

// Activate answers /migration/activate: the claimed host, ready, opens the
// room. Idempotent; a stale activation cannot revive an older generation.
func (c *Core) Activate(req wire.MigrationRequest, rt Route) (wire.MigrationActivation, error) {
	r, _, err := c.migrationRoom(req.Name, rt)
	if err != nil {
		return wire.MigrationActivation{}, err
	}
	defer r.mu.Unlock()
	m := &r.mig
	switch {
	case !wire.SecretEqual(req.Secret, r.hostSecret):
		return wire.MigrationActivation{}, wire.ErrInvalidHostCred
	case req.Incarnation != r.incarnation:
		return wire.MigrationActivation{}, wire.ErrIncarnationChanged
	case m.generation == 0 || req.ClaimID != m.claim.id || req.ExpectedGeneration != m.generation ||
		req.PromotedPlayerID != m.promoted || !wire.SecretEqual(req.FencingToken, m.fence):
		return wire.MigrationActivation{}, wire.ErrActivationFence
	}
	switch r.phaseLocked() {
	case phase.Hosted:
		// Activated already (the host credential is this generation's,
		// so it was this claim): the exact retry.
	case phase.Expired:
		return wire.MigrationActivation{}, terminal(wire.ErrHostActivationExpired)
	case phase.Vacant:
		return wire.MigrationActivation{}, wire.ErrHostConnectionLost
	case phase.Pending:
		if r.host == nil {
			return wire.MigrationActivation{}, wire.ErrHostNotConnected
		}
		isolated := r.takeIsolatedLocked()
		r.activatedLocked()
		m.lane = nil
		for _, cn := range isolated {
			cn.Close(ReasonRejoin)
		}
		r.changedLocked(c)
	default:
		return wire.MigrationActivation{}, wire.ErrRoomNotFound
	}
	return wire.MigrationActivation{MigrationState: r.stateLocked(), ClaimID: m.claim.id}, nil
}

// terminal is e marked not retryable (an activation that can never
// succeed, whatever the same code means for a claim).
func terminal(e *wire.Error) *wire.Error {
	c := *e
	c.Retryable = false
	return &c
}

// takeConnsLocked takes every socket out of the room (host, provisional
// host, clients, isolated clients) and returns them; the caller closes
// them under the lock, so that none forwards another packet.
func (r *Room) takeConnsLocked() []*Conn {
	out := make([]*Conn, 0, r.countLocked())
	if r.host != nil {
		out = append(out, r.host)
		r.host = nil
	}
	out = r.takeClientsLocked(out)
	return out
}

// takeClientsLocked appends every client (isolated ones too) to dst and
// empties the room of them.
func (r *Room) takeClientsLocked(dst []*Conn) []*Conn {
	for _, cl := range r.clients {
		dst = append(dst, cl)
	}
	clear(r.clients)
	r.mig.lane = nil
	return append(dst, r.takeIsolatedLocked()...)
}

// takeIsolatedLocked empties the isolated set and returns it.
func (r *Room) takeIsolatedLocked() []*Conn {
	out := make([]*Conn, 0, len(r.mig.isolated))
	for _, cl := range r.mig.isolated {
		cl.isolated = false
		out = append(out, cl)
	}
	r.mig.isolated = nil
	return out
}

// laneLocked reports whether cn, authenticating with a, is the promoted
// player's listen-client: the one exact, unexpired lane.
func (r *Room) laneLocked(a wire.Auth) bool {
	return r.phaseLocked() == phase.Pending && r.mig.lane == nil && a.ProvisionalHostSecret != "" &&
		wire.SecretEqual(a.ProvisionalHostSecret, r.hostSecret)
}

// isolateLocked adds cl to the isolated clients.
func (r *Room) isolateLocked(cl *Conn) {
	if r.mig.isolated == nil {
		r.mig.isolated = make(map[wire.ConnID]*Conn)
	}
	r.mig.isolated[cl.id] = cl
	cl.isolated = true
}
