package relay

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// Every test here names, in a comment above it, the rule of host migration
// it checks (docs/MIGRATION.md describes the behaviour as a whole).

// An allocation, or the reuse of a name, starts a fresh opaque
// incarnation whose generation counts from zero; reusing an empty room's
// name also gives it a new client credential.
func TestMigrationIncarnationPerAllocationAndReuse(t *testing.T) {
	m := newMigRoom(t, "inc", Options{})
	st, _ := m.current(m.clientSecret)
	if st.Generation != 0 || st.Incarnation == "" || st.HostPhase != wire.HostPhasePending || st.HostActive {
		t.Fatalf("a fresh allocation: %+v", st)
	}
	// The host plays and leaves: clients were there, so the room is vacant
	// at generation 0; nobody connected, a new allocation reuses the name.
	h := join(t, m.s, m.name, m.hostSecret)
	cl := join(t, m.s, m.name, m.clientSecret)
	h.ExpectToHost(wire.ToHostConnected)
	_ = h.WS.Close(websocket.StatusNormalClosure, "")
	cl.Closed()
	waitFor(t, "the room empty", func() bool { return m.s.Stats().Connections == 0 })
	if st, _ := m.current(m.clientSecret); st.HostPhase != wire.HostPhaseVacant {
		t.Fatalf("after the host left: %s, want vacant", st.HostPhase)
	}
	// A room waiting for a new host stays reserved: the players have one
	// activation lease to claim it; then the name is free again.
	if _, status, _ := allocate(t, m.s, m.name, "another-play"); status != http.StatusConflict {
		t.Fatalf("reuse within the recovery window: %d, want 409", status)
	}
	m.clk.Advance(DefaultActivationLease)
	a, status, e := allocate(t, m.s, m.name, "another-play")
	if status != http.StatusOK {
		t.Fatalf("reuse: %d %v", status, e)
	}
	if a.Publication.ClientSecret == m.clientSecret {
		t.Fatal("the client credential did not rotate when the empty name was reused")
	}
	n := *m
	n.epoch, n.clientSecret = a.Publication.Epoch, a.Publication.ClientSecret
	if st, e := n.current(n.clientSecret); e != nil || st.Incarnation == m.incarnation || st.Generation != 0 {
		t.Fatalf("the reused name: %+v %v, want a new incarnation at generation 0", st, e)
	}
	if _, e := n.current(m.clientSecret); e == nil {
		t.Fatal("the old client credential still reads the reused room")
	}
}

// /migration/current answers only the room's current client or host
// credential, and with metadata alone: no credential, no claim id.
func TestMigrationCurrentMetadataOnly(t *testing.T) {
	m := newVacantRoom(t, "cur", Options{})
	for _, secret := range []string{m.clientSecret, m.hostSecret} {
		if _, e := m.current(secret); e != nil {
			t.Fatalf("current with a room credential: %v", e)
		}
	}
	_, e := m.current("not-a-credential")
	wantErr(t, "current with a wrong credential", e, wire.ErrInvalidCredential)

	c := m.mustClaim("claim-cur", 0, "7", "")
	req := wire.MigrationRequest{Op: wire.OpCurrent, Name: m.name, Secret: m.clientSecret}
	resp, body := m.raw(req, m.epoch, 0, m.s.opts.BootID, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("current: %d %s", resp.StatusCode, body)
	}
	var fields map[string]any
	_ = json.Unmarshal(body, &fields)
	for _, k := range []string{"secret", "claimId", "grant"} {
		if _, ok := fields[k]; ok {
			t.Errorf("current carries %q", k)
		}
	}
	for _, secret := range []string{m.clientSecret, m.hostSecret, c.Secret, c.ClaimID} {
		if containsString(string(body), secret) {
			t.Errorf("current's body holds a credential or the claim id")
		}
	}
	for _, k := range []string{"roomName", "incarnation", "generation", "fencingToken", "promotedPlayerId", "claimedAt",
		"hostPhase", "hostActive", "claimPending", "activationExpiresAt", "activatedAt", "host", "port", "udpPortV2", "ssl"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("current lacks %q", k)
		}
	}
	if resp.Header.Get("Cache-Control") != "no-store, private" || resp.Header.Get("Pragma") != "no-cache" {
		t.Errorf("cache headers %q %q", resp.Header.Get("Cache-Control"), resp.Header.Get("Pragma"))
	}
}

func containsString(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// While the relay still has a live host, a claim also needs a one-use
// grant that host made, tied to the claim id, the room's state and the
// promoted player; a later authorization takes the earlier one's place.
func TestMigrationGrantRequiredWhileHostLive(t *testing.T) {
	m := newMigRoom(t, "grant", Options{})
	h := join(t, m.s, m.name, m.hostSecret)
	_ = h

	_, e := m.claim("c1", 0, "5", "")
	wantErr(t, "claim without a grant while the host is live", e, wire.ErrGrantRequired)
	_, e = m.claim("c1", 0, "5", "forged")
	wantErr(t, "claim with a forged grant", e, wire.ErrGrantInvalid)

	g, e := m.authorize("c1", 0, "5")
	if e != nil {
		t.Fatalf("authorize: %v", e)
	}
	if g.ClaimID != "c1" || g.Incarnation != m.incarnation || g.Generation != 0 || g.PromotedPlayerID != "5" || g.Grant == "" || g.ExpiresAt == "" {
		t.Fatalf("grant %+v", g)
	}
	// Bound to the claim id and the promoted player.
	_, e = m.claim("c2", 0, "5", g.Grant)
	wantErr(t, "the grant under another claim id", e, wire.ErrGrantInvalid)
	_, e = m.claim("c1", 0, "6", g.Grant)
	wantErr(t, "the grant for another player", e, wire.ErrGrantInvalid)

	// A newer authorization replaces it.
	g2, e := m.authorize("c2", 0, "6")
	if e != nil || g2.Grant == g.Grant {
		t.Fatalf("second authorize %+v %v", g2, e)
	}
	_, e = m.claim("c1", 0, "5", g.Grant)
	wantErr(t, "the replaced grant", e, wire.ErrGrantInvalid)

	c := m.mustClaim("c2", 0, "6", g2.Grant)
	if c.Generation != 1 || c.Replayed || c.ClaimID != "c2" || c.PromotedPlayerID != "6" || !c.ClaimPending {
		t.Fatalf("claim %+v", c)
	}
	// The claim that succeeds uses the grant up: a second claim from the
	// new generation cannot use it.
	_, e = m.claim("c3", 1, "6", g2.Grant)
	wantErr(t, "claim while the claimed host is pending", e, wire.ErrHostActivationPending)
}

// Repeating the same authorization before its grant expires answers that
// grant again, expiry unchanged; a grant lives 30 s by default.
func TestMigrationGrantRetryAndLifetime(t *testing.T) {
	m := newMigRoom(t, "grant-life", Options{})
	join(t, m.s, m.name, m.hostSecret)
	g, _ := m.authorize("c1", 0, "5")
	m.clk.Advance(29 * time.Second)
	again, e := m.authorize("c1", 0, "5")
	if e != nil || again != g {
		t.Fatalf("exact retry %+v %v, want %+v", again, e, g)
	}
	m.clk.Advance(time.Second)
	_, e = m.claim("c1", 0, "5", g.Grant)
	wantErr(t, "claim with a grant 30 s old", e, wire.ErrGrantInvalid)
	fresh, _ := m.authorize("c1", 0, "5")
	if fresh.Grant == g.Grant {
		t.Fatal("an expired grant was answered again")
	}
	m.mustClaim("c1", 0, "5", fresh.Grant)
}

// /migration/authorize is the live host's: the host credential alone, and
// only while that host is connected and active.
func TestMigrationAuthorizeNeedsTheLiveHost(t *testing.T) {
	m := newMigRoom(t, "auth-live", Options{})
	_, e := m.authorize("c1", 0, "5")
	wantErr(t, "authorize before the host connected", e, wire.ErrHostNotLive)
	join(t, m.s, m.name, m.hostSecret)
	req := m.tuple(wire.OpAuthorize, m.clientSecret, "c1", 0, "5")
	var g wire.MigrationGrant
	wantErr(t, "authorize with the client credential", m.call(req, &g), wire.ErrInvalidHostCred)
	_, e = m.authorize("c1", 1, "5")
	wantErr(t, "authorize for another generation", e, wire.ErrGenerationMismatch)
}

// Once the relay has seen its host go, the current client credential is
// all a claim needs to recover the room; every claim still names the
// exact claim id, incarnation, expected generation and promoted player.
func TestMigrationCrashRecoveryNeedsOnlyTheClientCredential(t *testing.T) {
	m := newMigRoom(t, "crash", Options{})
	h := join(t, m.s, m.name, m.hostSecret)
	cl := join(t, m.s, m.name, m.clientSecret)
	h.ExpectToHost(wire.ToHostConnected)
	_ = h.WS.CloseNow() // a crash
	cl.Closed()
	waitFor(t, "host loss observed", func() bool {
		st, _ := m.current(m.clientSecret)
		return st.HostPhase == wire.HostPhaseVacant
	})
	bad := m.tuple(wire.OpClaim, m.hostSecret, "c1", 0, "5")
	var c wire.MigrationClaim
	wantErr(t, "claim with the host credential", m.call(bad, &c), wire.ErrInvalidClientCred)
	bad = m.tuple(wire.OpClaim, m.clientSecret, "c1", 0, "5")
	bad.Incarnation = "other"
	wantErr(t, "claim on another incarnation", m.call(bad, &c), wire.ErrIncarnationChanged)
	_, e := m.claim("c1", 3, "5", "")
	wantErr(t, "claim from another generation", e, wire.ErrGenerationMismatch)
	if c := m.mustClaim("c1", 0, "5", ""); c.Generation != 1 {
		t.Fatalf("crash recovery claim %+v", c)
	}
}

// A claim that wins does everything at once: it uses the grant up, moves
// to the next generation with a new host credential and fencing token,
// records the promoted player, starts the activation lease and closes the
// older generation's sockets. Its answer carries the new host credential
// as secret, the claim id back, and replayed false.
func TestMigrationClaimCommits(t *testing.T) {
	m := newMigRoom(t, "commit", Options{})
	h := join(t, m.s, m.name, m.hostSecret)
	c1 := join(t, m.s, m.name, m.clientSecret)
	h.ExpectToHost(wire.ToHostConnected)
	c2 := join(t, m.s, m.name, m.clientSecret)
	h.ExpectToHost(wire.ToHostConnected)
	before, _ := m.current(m.clientSecret)
	g, _ := m.authorize("handoff", 0, "42")
	c := m.mustClaim("handoff", 0, "42", g.Grant)
	switch {
	case c.Generation != 1, c.Secret == "" || c.Secret == m.hostSecret, c.FencingToken == before.FencingToken,
		c.PromotedPlayerID != "42", c.ClaimID != "handoff", c.Replayed, c.HostPhase != wire.HostPhasePending,
		!c.ClaimPending, c.HostActive, c.ClaimedAt == "", c.ActivationExpiresAt == "", c.Port == 0, c.UDPPortV2 == 0:
		t.Fatalf("claim answer %+v", c)
	}
	lease, _ := time.Parse(time.RFC3339Nano, c.ActivationExpiresAt)
	claimed, _ := time.Parse(time.RFC3339Nano, c.ClaimedAt)
	if lease.Sub(claimed) != DefaultActivationLease {
		t.Fatalf("lease %v, want %v", lease.Sub(claimed), DefaultActivationLease)
	}
	for i, p := range []*wstest.Peer{h, c1, c2} {
		if code := p.Closed(); code != websocket.StatusNormalClosure {
			t.Fatalf("old-generation socket %d closed with %v", i, code)
		}
	}
	if st, _ := m.current(m.clientSecret); st.Generation != 1 {
		t.Fatalf("the client credential changed at the claim (generation %d)", st.Generation)
	}
	// The old host credential is dead: current refuses it.
	_, e := m.current(m.hostSecret)
	wantErr(t, "current with the old host credential", e, wire.ErrInvalidCredential)
}

// Replays: the same claim again (claim id, the incarnation and generation
// it started from, promoted player) answers the credential and state it
// committed, replayed true, while its lease runs or once its host has
// activated; after a lease that expired unactivated it answers the
// retryable host_activation_expired; the same claim id with any other
// values is migration_claim_id_conflict.
func TestMigrationClaimReplayMatrix(t *testing.T) {
	t.Run("pending", func(t *testing.T) {
		m := newVacantRoom(t, "replay-pending", Options{})
		c := m.mustClaim("c1", 0, "9", "")
		m.clk.Advance(30 * time.Second)
		r := m.mustClaim("c1", 0, "9", "")
		if !r.Replayed || r.Secret != c.Secret || r.Generation != 1 || r.FencingToken != c.FencingToken ||
			r.ActivationExpiresAt != c.ActivationExpiresAt {
			t.Fatalf("replay %+v, want the committed answer (lease unchanged)", r)
		}
		_, e := m.claim("c1", 0, "10", "")
		wantErr(t, "the claim id with another player", e, wire.ErrClaimIDConflict)
		_, e = m.claim("c1", 1, "9", "")
		wantErr(t, "the claim id with another generation", e, wire.ErrClaimIDConflict)
	})
	t.Run("activated", func(t *testing.T) {
		m := newVacantRoom(t, "replay-active", Options{})
		c := m.mustClaim("c1", 0, "9", "")
		join(t, m.s, m.name, c.Secret)
		if _, e := m.activate(c); e != nil {
			t.Fatalf("activate: %v", e)
		}
		m.clk.Advance(2 * DefaultActivationLease)
		r := m.mustClaim("c1", 0, "9", "")
		if !r.Replayed || r.Secret != c.Secret || !r.HostActive {
			t.Fatalf("replay after activation %+v", r)
		}
	})
	t.Run("expired", func(t *testing.T) {
		m := newVacantRoom(t, "replay-expired", Options{})
		m.mustClaim("c1", 0, "9", "")
		m.clk.Advance(DefaultActivationLease)
		_, e := m.claim("c1", 0, "9", "")
		wantErr(t, "replay after the lease expired", e, wire.ErrHostActivationExpired)
		st, _ := m.current(m.clientSecret)
		if st.HostPhase != wire.HostPhaseExpired || st.ClaimPending {
			t.Fatalf("after the lease: %+v", st)
		}
		// A fresh claim id against the current generation.
		if c := m.mustClaim("c2", 1, "11", ""); c.Generation != 2 {
			t.Fatalf("fresh claim %+v", c)
		}
	})
}

// promoted_player_id is a PurrNet player id written one way only: a
// nonzero unsigned 64-bit number in plain decimal, with no sign, spaces or
// leading zeros.
func TestMigrationPromotedPlayerIDCanonical(t *testing.T) {
	m := newVacantRoom(t, "pid", Options{})
	// (Surrounding whitespace never reaches a handler: net/http trims it;
	// wire's own test checks the parser with it.)
	for _, bad := range []string{"0", "-1", "+5", "05", "18446744073709551616", "0x5", "", "1e3", "5_0"} {
		resp, body := m.raw(m.tuple(wire.OpClaim, m.clientSecret, "c", 0, "1"), m.epoch, 0, m.s.opts.BootID,
			func(h http.Header) { h.Set(wire.HeaderPromotedPlayerID, bad) })
		e := wire.DecodeError(resp.StatusCode, body)
		if bad == "" {
			wantErr(t, "an empty promoted_player_id", e, wire.ErrMissingHeader)
			continue
		}
		wantErr(t, "promoted_player_id "+bad, e, wire.ErrBadPlayerID)
	}
	if c := m.mustClaim("c", 0, "18446744073709551615", ""); c.PromotedPlayerID != "18446744073709551615" {
		t.Fatalf("2^64-1: %+v", c)
	}
}

// A claim starts one activation lease of a fixed 60 s. The new host's
// socket authenticating (only provisionally) does not move its deadline,
// and neither does a replay of the claim. A host not activated by then
// can be replaced: a peer claims the next generation, which fences the
// provisional socket and its expired credential in the same step.
func TestMigrationLeaseExpiresAndFences(t *testing.T) {
	m := newVacantRoom(t, "lease", Options{ActivationLease: 10 * time.Second})
	c := m.mustClaim("c1", 0, "3", "")
	m.clk.Advance(5 * time.Second)
	host := join(t, m.s, m.name, c.Secret) // provisional
	lane := provisional(t, m.s, m.name, m.clientSecret, c.Secret)
	laneID := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	m.clk.Advance(4 * time.Second)
	if r := m.mustClaim("c1", 0, "3", ""); !r.Replayed || r.ActivationExpiresAt != c.ActivationExpiresAt {
		t.Fatalf("replay %+v: the lease moved", r)
	}
	if st, _ := m.current(m.clientSecret); st.HostPhase != wire.HostPhasePending {
		t.Fatalf("9 s into a 10 s lease: %s", st.HostPhase)
	}
	// The replay disconnected nobody: the provisional host and its lane
	// still talk.
	lane.Send([]byte("still here"))
	if p := host.ExpectToHost(wire.ToHostData); p.IDs[0] != laneID {
		t.Fatalf("after the replay the host got %+v", p)
	}
	m.clk.Advance(time.Second)
	if st, _ := m.current(m.clientSecret); st.HostPhase != wire.HostPhaseExpired {
		t.Fatalf("10 s into a 10 s lease: %s", st.HostPhase)
	}
	_, e := m.activate(c)
	expired := *wire.ErrHostActivationExpired
	expired.Retryable = false // terminal for an activation
	wantErr(t, "activate after the lease", e, &expired)
	next := m.mustClaim("c2", 1, "4", "")
	for _, p := range []*wstest.Peer{host, lane} {
		if code := p.Closed(); code != websocket.StatusNormalClosure {
			t.Fatalf("the expired generation's socket closed with %v", code)
		}
	}
	// Its credential is fenced with it.
	p := wstest.Dial(t, m.s.WSURL())
	if got := p.Auth(m.name, c.Secret); got != wire.AuthFailed {
		t.Fatalf("the expired credential authenticated: %d", got)
	}
	if next.Generation != 2 {
		t.Fatalf("second claim %+v", next)
	}
}

// Activation checks the current claim exactly, the provisional host
// socket and the lease still running. The same activation again changes
// nothing; an old or overtaken one cannot bring back an earlier
// generation. host_not_connected is retryable only until the one-use host
// credential has been used; if the provisional socket that used it then
// goes, activation fails for good with host_connection_lost and the room
// keeps its committed generation, vacant, for a fresh claim.
func TestMigrationActivateRules(t *testing.T) {
	m := newVacantRoom(t, "act", Options{})
	c := m.mustClaim("c1", 0, "3", "")
	_, e := m.activate(c)
	wantErr(t, "activate before the host connected", e, wire.ErrHostNotConnected)

	wrong := c
	wrong.FencingToken = "other"
	_, e = m.activate(wrong)
	wantErr(t, "activate with another fence", e, wire.ErrActivationFence)
	wrong = c
	wrong.ClaimID = "other"
	_, e = m.activate(wrong)
	wantErr(t, "activate with another claim id", e, wire.ErrActivationFence)
	wrong = c
	wrong.Secret = m.hostSecret
	_, e = m.activate(wrong)
	wantErr(t, "activate with the old host credential", e, wire.ErrInvalidHostCred)

	host := join(t, m.s, m.name, c.Secret)
	a, e := m.activate(c)
	if e != nil {
		t.Fatalf("activate: %v", e)
	}
	again, e := m.activate(c)
	if e != nil || again != a {
		t.Fatalf("repeated activation %+v %v, want %+v", again, e, a)
	}

	// The activated host leaves (a client was there, so the room stays);
	// a new claim; the old activation cannot revive its generation.
	cl := join(t, m.s, m.name, m.clientSecret)
	host.ExpectToHost(wire.ToHostConnected)
	_ = host.WS.Close(websocket.StatusNormalClosure, "")
	cl.Closed()
	waitFor(t, "vacant", func() bool { st, _ := m.current(m.clientSecret); return st.HostPhase == wire.HostPhaseVacant })
	c2 := m.mustClaim("c2", 1, "4", "")
	_, e = m.activate(c)
	wantErr(t, "a superseded activation", e, wire.ErrInvalidHostCred)

	// The provisional socket is lost before activation: terminal, vacant.
	h2 := join(t, m.s, m.name, c2.Secret)
	_ = h2.WS.CloseNow()
	waitFor(t, "the provisional host gone", func() bool {
		st, _ := m.current(m.clientSecret)
		return st.HostPhase == wire.HostPhaseVacant
	})
	_, e = m.activate(c2)
	wantErr(t, "activate after the provisional socket was lost", e, wire.ErrHostConnectionLost)
	st, _ := m.current(m.clientSecret)
	if st.Generation != 2 {
		t.Fatalf("the room lost its committed generation: %+v", st)
	}
	m.mustClaim("c3", 2, "5", "")
}

// The success body of /migration/activate is what PurrNet's client
// validates (docs/MIGRATION.md section 1): hostActive true, claimPending
// false, hostPhase "active", and roomName, incarnation, generation,
// fencingToken, promotedPlayerId and claimId equal to the request.
func TestMigrationActivateBodyIsWhatPurrNetValidates(t *testing.T) {
	m := newVacantRoom(t, "body", Options{})
	c := m.mustClaim("7f3c0a9e5b1d4e2f8a6c3b0d9e7f1a2b", 0, "76561198000000000", "")
	join(t, m.s, m.name, c.Secret)
	req := m.tuple(wire.OpActivate, c.Secret, c.ClaimID, c.Generation, c.PromotedPlayerID)
	req.FencingToken = c.FencingToken
	resp, body := m.raw(req, m.epoch, 0, m.s.opts.BootID, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("activate: %d %s", resp.StatusCode, body)
	}
	// As Unity's JsonUtility reads it: the named fields, types as declared.
	var got struct {
		HostActive       bool   `json:"hostActive"`
		ClaimPending     bool   `json:"claimPending"`
		HostPhase        string `json:"hostPhase"`
		RoomName         string `json:"roomName"`
		Incarnation      string `json:"incarnation"`
		Generation       int    `json:"generation"`
		FencingToken     string `json:"fencingToken"`
		PromotedPlayerID string `json:"promotedPlayerId"`
		ClaimID          string `json:"claimId"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	want := got
	want.HostActive, want.ClaimPending, want.HostPhase = true, false, "active"
	want.RoomName, want.Incarnation, want.Generation = m.name, m.incarnation, 1
	want.FencingToken, want.PromotedPlayerID, want.ClaimID = c.FencingToken, "76561198000000000", c.ClaimID
	if got != want {
		t.Fatalf("activation body %+v, want %+v", got, want)
	}
}

// A forwarded call carries the room's epoch and boot, and the relay checks
// them before it reads or changes anything: a count revision older than
// its own is fine, a newer one or another owner is refused.
func TestMigrationRouteSnapshotChecked(t *testing.T) {
	m := newMigRoom(t, "route", Options{})
	req := wire.MigrationRequest{Op: wire.OpCurrent, Secret: m.clientSecret}
	var st wire.MigrationState
	wantErr(t, "another boot", m.callRoute(req, m.epoch, 0, "other-boot", &st),
		wire.ErrStaleBoot)
	wantErr(t, "another epoch", m.callRoute(req, "other-epoch", 0, m.s.opts.BootID, &st), wire.ErrRouteChanged)
	wantErr(t, "a future revision", m.callRoute(req, m.epoch, 1<<40, m.s.opts.BootID, &st), wire.ErrRouteChanged)
	if e := m.callRoute(req, m.epoch, 1, m.s.opts.BootID, &st); e != nil {
		t.Fatalf("an older revision: %v", e)
	}
	req.Name = "nowhere"
	wantErr(t, "no such room", m.callRoute(req, m.epoch, 0, m.s.opts.BootID, &st), wire.ErrRoomNotFound)
}

// Concurrency: many claims of one room at once, each with its own claim
// id: exactly one wins; the others get a generation mismatch or find a
// claimed host pending. Claims of other rooms on the same relay go on
// meanwhile (-race).
func TestMigrationConcurrentClaimsOneWins(t *testing.T) {
	m := newVacantRoom(t, "race", Options{})
	others := make([]*migRoom, 4)
	for i := range others {
		others[i] = allocMigRoom(t, m.s, m.clk, "race-other-"+string(rune('a'+i)))
		others[i].vacate()
	}
	const n = 16
	var wg sync.WaitGroup
	won := make(chan wire.MigrationClaim, n)
	for i := range n {
		wg.Go(func() {
			c, e := m.claim("claim-"+string(rune('a'+i)), 0, "7", "")
			switch {
			case e == nil:
				won <- c
			case e.Code != wire.ErrHostActivationPending.Code && e.Code != wire.ErrGenerationMismatch.Code:
				t.Errorf("a losing claim: %v", e)
			}
		})
	}
	for _, o := range others {
		wg.Go(func() {
			if _, e := o.claim("own", 0, "1", ""); e != nil {
				t.Errorf("another room's claim: %v", e)
			}
		})
	}
	wg.Wait()
	close(won)
	if len(won) != 1 {
		t.Fatalf("%d claims won, want exactly 1", len(won))
	}
	if c := <-won; c.Generation != 1 {
		t.Fatalf("the winner: %+v", c)
	}
}
