package relay

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// migRoom is one allocated room on a relay with a fake clock, and the
// balancer's side of the migration calls (the internal routes, with the
// route snapshot the balancer would send).
type migRoom struct {
	t            *testing.T
	s            *Server
	clk          *clock.Fake
	name         string
	hostSecret   string
	clientSecret string
	epoch        string
	incarnation  string
}

func newMigRoom(t *testing.T, name string, opts Options) *migRoom {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	opts.Clock = clk
	s := startRelay(t, opts)
	return allocMigRoom(t, s, clk, name)
}

func allocMigRoom(t *testing.T, s *Server, clk *clock.Fake, name string) *migRoom {
	t.Helper()
	a, status, e := allocate(t, s, name, "alloc-"+name)
	if status != http.StatusOK {
		t.Fatalf("allocate %q: %d %v", name, status, e)
	}
	m := &migRoom{t: t, s: s, clk: clk, name: name, hostSecret: a.Capability.Secret,
		clientSecret: a.Publication.ClientSecret, epoch: a.Publication.Epoch}
	st, err := m.current(m.clientSecret)
	if err != nil {
		t.Fatalf("current: %v", err)
	}
	m.incarnation = st.Incarnation
	return m
}

// call makes one forwarded migration call and decodes a success into out.
func (m *migRoom) call(req wire.MigrationRequest, out any) *wire.Error {
	m.t.Helper()
	return m.callRoute(req, m.epoch, 0, m.s.opts.BootID, out)
}

func (m *migRoom) callRoute(req wire.MigrationRequest, epoch string, revision uint64, boot string, out any) *wire.Error {
	m.t.Helper()
	if req.Name == "" {
		req.Name = m.name
	}
	resp, body := m.raw(req, epoch, revision, boot, nil)
	if resp.StatusCode != http.StatusOK {
		return wire.DecodeError(resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		m.t.Fatalf("decode %s answer %s: %v", req.Op, body, err)
	}
	return nil
}

// raw makes one forwarded call as the balancer would (edit may change its
// headers last) and returns the answer as it is.
func (m *migRoom) raw(req wire.MigrationRequest, epoch string, revision uint64, boot string, edit func(http.Header)) (*http.Response, []byte) {
	m.t.Helper()
	hr, _ := http.NewRequest(req.Op.Method(), m.s.HTTPURL()+req.Op.RelayPath(), nil)
	wire.SetInternal(hr.Header, testSecret)
	hr.Header.Set(wire.HeaderTargetBoot, boot)
	hr.Header.Set(wire.HeaderRoomEpoch, epoch)
	hr.Header.Set(wire.HeaderRoomRevision, strconv.FormatUint(revision, 10))
	req.SetHeaders(hr.Header)
	if edit != nil {
		edit(hr.Header)
	}
	return do(m.t, hr)
}

func (m *migRoom) current(secret string) (wire.MigrationState, *wire.Error) {
	m.t.Helper()
	var st wire.MigrationState
	e := m.call(wire.MigrationRequest{Op: wire.OpCurrent, Secret: secret}, &st)
	return st, e
}

// tuple is a claim, authorize or activate request on the room's current
// incarnation.
func (m *migRoom) tuple(op wire.MigrationOp, secret, claimID string, gen uint64, promoted string) wire.MigrationRequest {
	return wire.MigrationRequest{Op: op, Name: m.name, Secret: secret, ClaimID: claimID, Incarnation: m.incarnation,
		ExpectedGeneration: gen, PromotedPlayerID: promoted}
}

// newVacantRoom is newMigRoom after its host crashed with a client there:
// the relay observed host loss, so a claim needs only the client
// credential.
func newVacantRoom(t *testing.T, name string, opts Options) *migRoom {
	t.Helper()
	m := newMigRoom(t, name, opts)
	m.vacate()
	return m
}

// vacate: the allocation's host connects, a client joins, the host's
// socket drops; the client is closed with it and the room is vacant.
func (m *migRoom) vacate() {
	m.t.Helper()
	h := join(m.t, m.s, m.name, m.hostSecret)
	cl := join(m.t, m.s, m.name, m.clientSecret)
	h.ExpectToHost(wire.ToHostConnected)
	_ = h.WS.CloseNow()
	cl.Closed()
	waitFor(m.t, "the room vacant", func() bool {
		st, _ := m.current(m.clientSecret)
		return st.HostPhase == wire.HostPhaseVacant && m.s.Stats().Connections == 0
	})
}

func (m *migRoom) authorize(claimID string, gen uint64, promoted string) (wire.MigrationGrant, *wire.Error) {
	m.t.Helper()
	var g wire.MigrationGrant
	e := m.call(m.tuple(wire.OpAuthorize, m.hostSecret, claimID, gen, promoted), &g)
	return g, e
}

func (m *migRoom) claim(claimID string, gen uint64, promoted, grant string) (wire.MigrationClaim, *wire.Error) {
	m.t.Helper()
	req := m.tuple(wire.OpClaim, m.clientSecret, claimID, gen, promoted)
	req.Grant = grant
	var c wire.MigrationClaim
	e := m.call(req, &c)
	return c, e
}

// mustClaim claims for promoted from gen and returns the answer.
func (m *migRoom) mustClaim(claimID string, gen uint64, promoted, grant string) wire.MigrationClaim {
	m.t.Helper()
	c, e := m.claim(claimID, gen, promoted, grant)
	if e != nil {
		m.t.Fatalf("claim %s: %v", claimID, e)
	}
	return c
}

func (m *migRoom) activate(c wire.MigrationClaim) (wire.MigrationActivation, *wire.Error) {
	m.t.Helper()
	req := m.tuple(wire.OpActivate, c.Secret, c.ClaimID, c.Generation, c.PromotedPlayerID)
	req.FencingToken = c.FencingToken
	var a wire.MigrationActivation
	e := m.call(req, &a)
	return a, e
}

// wantErr fails unless e is want, with its status and retryable flag.
func wantErr(t *testing.T, what string, e *wire.Error, want *wire.Error) {
	t.Helper()
	switch {
	case e == nil:
		t.Fatalf("%s succeeded, want %s", what, want.Code)
	case e.Code != want.Code || e.Status != want.Status || e.Retryable != want.Retryable:
		t.Fatalf("%s: %s (%d, retryable %v), want %s (%d, retryable %v)", what,
			e.Code, e.Status, e.Retryable, want.Code, want.Status, want.Retryable)
	}
}

// provisional authenticates a socket as the promoted player's listen-client.
func provisional(t *testing.T, s *Server, room, clientSecret, hostSecret string) *wstest.Peer {
	t.Helper()
	p := wstest.Dial(t, s.WSURL())
	p.Send(wire.Auth{RoomName: room, ClientSecret: clientSecret, ProvisionalHostSecret: hostSecret}.Marshal())
	if b := p.Recv(); len(b) != 1 || b[0] != wire.Authenticated {
		t.Fatalf("lane auth reply %v", b)
	}
	return p
}
