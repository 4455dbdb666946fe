package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// Steps of the migration smoke check, in order.
const (
	StepMigPlay      = "migration-play"
	StepMigCurrent   = "migration-current"
	StepMigAuthorize = "migration-authorize"
	StepMigClaim     = "migration-claim"
	StepMigFenced    = "migration-old-sockets-closed"
	StepMigPromoted  = "migration-promoted-host"
	StepMigIsolated  = "migration-isolated-client"
	StepMigActivate  = "migration-activate"
	StepMigRejoin    = "migration-rejoin"
	StepMigCrash     = "migration-host-crash"
	StepMigRecover   = "migration-crash-claim"
	StepMigRecovered = "migration-recovered"
	StepMigLeave     = "migration-leave"
)

// SmokeMigration runs the host-migration smoke check (`purrctl smoke
// --migration`): a host and two clients (players A and B) play; the host
// authorizes a graceful handoff to A, A claims with the grant (every old
// socket closes), connects as the provisional host with its own
// listen-client (provisionalHostSecret), a client that joins before
// activation is isolated and closed at activation, A activates, B rejoins
// and plays; then A's host crashes, B reads the vacant room, claims with
// the client credential alone, connects as host with its listen-client,
// activates, and A rejoins and plays; the clients leave, then the host
// (the room ends with it). Each step is bounded by
// opts.Timeout; the first failure is a *SmokeError naming it.
func SmokeMigration(ctx context.Context, opts SmokeOptions) (SmokeReport, error) {
	m := &migSmoke{smoke: newSmoke(opts, "purrfly-migration-")}
	s := m.smoke
	defer m.cleanup()
	if err := s.run(ctx, []smokeStep{
		{StepAllocate, s.allocate},
		{StepHostConnect, s.hostConnect},
		{StepJoin, s.join},
		{StepMigPlay, m.play},
		{StepMigCurrent, m.current},
		{StepMigAuthorize, m.authorize},
		{StepMigClaim, m.claim},
		{StepMigFenced, m.fenced},
		{StepMigPromoted, m.promoted},
		{StepMigIsolated, m.isolated},
		{StepMigActivate, m.activate},
		{StepMigRejoin, m.rejoin},
		{StepMigCrash, m.crash},
		{StepMigRecover, m.recover},
		{StepMigRecovered, m.recovered},
		{StepMigLeave, m.leave},
	}); err != nil {
		return s.rep, err
	}
	s.opts.Logf("migration smoke passed over %s: room %s, generation %d, %s", s.opts.Transport, s.rep.Room, m.state.Generation,
		s.rep.Elapsed.Round(time.Millisecond))
	return s.rep, nil
}

// The players' PurrNet ids.
const (
	smokeHostPlayer = "1001"
	smokePlayerA    = "1002"
	smokePlayerB    = "1003"
)

// migSmoke is one migration smoke run's state, owned by SmokeMigration.
type migSmoke struct {
	*smoke
	a, b     *Client // players A and B as ordinary clients
	aID, bID wire.ConnID
	state    wire.MigrationState
	grant    wire.MigrationGrant
	claimed  wire.MigrationClaim
	lane     *Client // the promoted player's listen-client
	laneID   wire.ConnID
	stray    *Client // joined during the lease
}

func (m *migSmoke) cleanup() {
	for _, c := range []*Client{m.a, m.b, m.lane, m.stray} {
		if c != nil {
			c.CloseNow()
		}
	}
	m.smoke.cleanup()
}

// exchange sends one packet each way between host and cl (host-side id).
func exchange(ctx context.Context, h *Host, cl *Client, id wire.ConnID) error {
	up := []byte("purrfly-migration up " + randHex(6))
	if err := cl.Send(ctx, up); err != nil {
		return err
	}
	p, err := nextData(ctx, h)
	if err != nil {
		return fmt.Errorf("host waiting for a client's packet: %w", err)
	}
	if p.IDs[0] != id || !bytes.Equal(p.Payload, up) {
		return fmt.Errorf("host got %q from %d, want %q from %d", p.Payload, p.IDs[0], up, id)
	}
	down := []byte("purrfly-migration down " + randHex(6))
	if err := h.SendOne(ctx, id, down); err != nil {
		return err
	}
	got, err := cl.Recv(ctx)
	if err != nil {
		return fmt.Errorf("client waiting for the host's packet: %w", err)
	}
	if !bytes.Equal(got, down) {
		return fmt.Errorf("client got %q, want %q", got, down)
	}
	return nil
}

// closedByRelay reports whether err says the relay ended the connection:
// a UDP Disconnect or a WebSocket close frame.
func closedByRelay(err error) bool {
	return errors.Is(err, ErrDisconnected) || CloseStatus(err) >= 0
}

// nextData reads host packets until a data packet (connect and disconnect
// notices of others may come first).
func nextData(ctx context.Context, h *Host) (wire.ToHostPacket, error) {
	for {
		p, err := h.Next(ctx)
		if err != nil || p.Type == wire.ToHostData {
			return p, err
		}
	}
}

// connected reads host packets until a connect notice and returns its id.
func connected(ctx context.Context, h *Host) (wire.ConnID, error) {
	for {
		p, err := h.Next(ctx)
		if err != nil {
			return 0, fmt.Errorf("host waiting for a connect notice: %w", err)
		}
		if p.Type == wire.ToHostConnected && len(p.IDs) == 1 {
			return p.IDs[0], nil
		}
	}
}

// joinAs connects a client with the room's client credential (and a
// provisional host secret for a listen-client) and returns the id its
// host saw, when host is given.
func (m *migSmoke) joinAs(ctx context.Context, provisional string, host *Host) (*Client, wire.ConnID, error) {
	c, err := m.bal.Join(ctx, m.opts.Room)
	if err != nil {
		return nil, 0, err
	}
	o := *m.dial
	o.ProvisionalHostSecret = provisional
	cl, err := DialClient(ctx, c, m.opts.Room, &o)
	if err != nil || host == nil {
		return cl, 0, err
	}
	id, err := connected(ctx, host)
	if err != nil {
		cl.CloseNow()
		return nil, 0, err
	}
	return cl, id, nil
}

func (m *migSmoke) play(ctx context.Context) error {
	var err error
	if m.a, m.aID, err = m.joinAs(ctx, "", m.host); err != nil {
		return err
	}
	if m.b, m.bID, err = m.joinAs(ctx, "", m.host); err != nil {
		return err
	}
	if err := exchange(ctx, m.host, m.a, m.aID); err != nil {
		return err
	}
	return exchange(ctx, m.host, m.b, m.bID)
}

func (m *migSmoke) current(ctx context.Context) error {
	st, err := m.bal.MigrationCurrent(ctx, m.opts.Room, m.joinC.Secret)
	if err != nil {
		return err
	}
	if st.HostPhase != wire.HostPhaseActive || st.Generation != 0 || st.Incarnation == "" {
		return fmt.Errorf("current says %s at generation %d, want an active host at 0", st.HostPhase, st.Generation)
	}
	m.state = st
	return nil
}

func (m *migSmoke) tuple(secret, claimID, promoted string) wire.MigrationRequest {
	return wire.MigrationRequest{Name: m.opts.Room, Secret: secret, ClaimID: claimID, Incarnation: m.state.Incarnation,
		ExpectedGeneration: m.state.Generation, PromotedPlayerID: promoted}
}

func (m *migSmoke) authorize(ctx context.Context) error {
	g, err := m.bal.Authorize(ctx, m.tuple(m.hostC.Secret, NewClaimID(), smokePlayerA))
	if err != nil {
		return err
	}
	m.grant = g
	m.opts.Logf("the host authorized a handoff to player %s", smokePlayerA)
	return nil
}

func (m *migSmoke) claim(ctx context.Context) error {
	req := m.tuple(m.joinC.Secret, m.grant.ClaimID, smokePlayerA)
	req.Grant = m.grant.Grant
	// The exact request on every retry: the relay replays a committed
	// claim; an indeterminate answer is retried the same way.
	var c wire.MigrationClaim
	err := Retry{Tries: 5, Delay: 200 * time.Millisecond, Permanent: IsPermanent}.Do(ctx, func(ctx context.Context) error {
		var err error
		c, err = m.bal.Claim(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	if c.HostPhase != wire.HostPhasePending {
		return fmt.Errorf("claim answered phase %s, want pending", c.HostPhase)
	}
	m.claimed = c
	m.opts.Logf("player %s claimed generation %d", smokePlayerA, c.Generation)
	return nil
}

// fenced: every old-generation socket was closed by the claim.
func (m *migSmoke) fenced(ctx context.Context) error {
	if _, err := m.host.Next(ctx); !closedByRelay(err) {
		return fmt.Errorf("the old host after the claim: %v, want disconnected", err)
	}
	for _, c := range []*Client{m.a, m.b} {
		if _, err := c.Recv(ctx); !closedByRelay(err) {
			return fmt.Errorf("an old client after the claim: %v, want disconnected", err)
		}
	}
	m.host.CloseNow()
	m.a.CloseNow()
	m.b.CloseNow()
	m.host, m.a, m.b = nil, nil, nil
	return nil
}

// promote connects the claimed host and its listen-client.
func (m *migSmoke) promote(ctx context.Context, c wire.MigrationClaim) error {
	h, err := DialHost(ctx, PromotedCapability(c), m.opts.Room, m.dial)
	if err != nil {
		return fmt.Errorf("provisional host: %w", err)
	}
	m.host = h
	if m.lane, m.laneID, err = m.joinAs(ctx, c.Secret, h); err != nil {
		return fmt.Errorf("listen-client: %w", err)
	}
	return exchange(ctx, m.host, m.lane, m.laneID)
}

func (m *migSmoke) promoted(ctx context.Context) error { return m.promote(ctx, m.claimed) }

// isolated: player B joins before activation. It is not announced to the
// provisional host (rejoin checks that the host's first notice is B's
// rejoined socket) and is closed at activation, to rejoin.
func (m *migSmoke) isolated(ctx context.Context) error {
	var err error
	m.stray, _, err = m.joinAs(ctx, "", nil)
	return err
}

func (m *migSmoke) activate(ctx context.Context) error {
	a, err := m.bal.ActivateUntil(ctx, nil, ActivationRequest(m.opts.Room, m.claimed))
	if err != nil {
		return err
	}
	m.state = a.MigrationState
	if _, err := m.stray.Recv(ctx); !closedByRelay(err) {
		return fmt.Errorf("a client that joined during the lease, at activation: %v, want disconnected", err)
	}
	m.stray.CloseNow()
	m.stray = nil
	m.opts.Logf("player %s activated as host", smokePlayerA)
	return nil
}

func (m *migSmoke) rejoin(ctx context.Context) error {
	var err error
	if m.b, m.bID, err = m.joinAs(ctx, "", m.host); err != nil {
		return err
	}
	if err := exchange(ctx, m.host, m.b, m.bID); err != nil {
		return err
	}
	return exchange(ctx, m.host, m.lane, m.laneID)
}

// crash: the promoted host's socket drops; its clients are closed and the
// room reads vacant.
func (m *migSmoke) crash(ctx context.Context) error {
	m.host.CloseNow()
	m.host = nil
	for _, c := range []*Client{m.b, m.lane} {
		if _, err := c.Recv(ctx); !closedByRelay(err) {
			return fmt.Errorf("a client after its host crashed: %v, want disconnected", err)
		}
		c.CloseNow()
	}
	m.b, m.lane = nil, nil
	for {
		st, err := m.bal.MigrationCurrent(ctx, m.opts.Room, m.joinC.Secret)
		if err != nil {
			return err
		}
		if st.HostPhase == wire.HostPhaseVacant {
			m.state = st
			return nil
		}
		if err := clock.Sleep(ctx, nil, 50*time.Millisecond); err != nil {
			return fmt.Errorf("the room still reads %s after its host crashed: %w", st.HostPhase, err)
		}
	}
}

func (m *migSmoke) recover(ctx context.Context) error {
	c, err := m.bal.Claim(ctx, m.tuple(m.joinC.Secret, NewClaimID(), smokePlayerB))
	if err != nil {
		return err
	}
	m.claimed = c
	m.opts.Logf("player %s claimed generation %d after the crash", smokePlayerB, c.Generation)
	return nil
}

func (m *migSmoke) recovered(ctx context.Context) error {
	if err := m.promote(ctx, m.claimed); err != nil {
		return err
	}
	a, err := m.bal.ActivateUntil(ctx, nil, ActivationRequest(m.opts.Room, m.claimed))
	if err != nil {
		return err
	}
	m.state = a.MigrationState
	if m.a, m.aID, err = m.joinAs(ctx, "", m.host); err != nil {
		return err
	}
	return exchange(ctx, m.host, m.a, m.aID)
}

// leave: the clients leave (the host hears each), then the host: an
// active host leaving an empty room ends it.
func (m *migSmoke) leave(ctx context.Context) error {
	for _, c := range []struct {
		cl *Client
		id wire.ConnID
	}{{m.a, m.aID}, {m.lane, m.laneID}} {
		if err := c.cl.Close(); err != nil {
			return err
		}
		for {
			p, err := m.host.Next(ctx)
			if err != nil {
				return fmt.Errorf("host waiting for a client's disconnect notice: %w", err)
			}
			if p.Type == wire.ToHostDisconnected && p.IDs[0] == c.id {
				break
			}
		}
	}
	m.a, m.lane = nil, nil
	err := m.host.Close()
	m.host = nil
	return err
}
