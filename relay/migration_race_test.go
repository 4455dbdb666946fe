package relay

import (
	"net/http"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// migCore is a routing core with a fake clock and one allocated room, no
// transports (the tests play the readers and writers).
type migCore struct {
	t       *testing.T
	c       *core
	clk     *clock.Fake
	name    string
	alloc   allocation
	rt      route
	inc     string
	scratch []*buf.Buf
}

func newMigCore(t *testing.T, name string) *migCore {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	c := testCore(t, clk)
	a, err := c.allocate(name, "alloc-"+name)
	if err != nil {
		t.Fatal(err)
	}
	mc := &migCore{t: t, c: c, clk: clk, name: name, alloc: a, rt: route{epoch: a.pub.Epoch}}
	st, err := c.migrationCurrent(wire.MigrationRequest{Op: wire.OpCurrent, Name: name, Secret: a.pub.ClientSecret}, mc.rt)
	if err != nil {
		t.Fatal(err)
	}
	mc.inc = st.Incarnation
	return mc
}

// deliver hands msg to the core as cn's reader would.
func (mc *migCore) deliver(cn *conn, msg []byte) {
	b := buf.Get(buf.Headroom + len(msg))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], msg)
	mc.c.handle(cn, b)
}

// raw is deliver without handle's entry check (cn.closing): what a
// reader does that passed that check just before another goroutine
// closed cn.
func (mc *migCore) rawFromHost(cn *conn, msg []byte) {
	b := buf.Get(buf.Headroom + len(msg))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], msg)
	mc.c.fromHost(cn, b)
}

func (mc *migCore) drain(cn *conn) [][]byte {
	mc.scratch = cn.takeBatch(mc.scratch[:0])
	var out [][]byte
	for i, b := range mc.scratch {
		out = append(out, append([]byte(nil), b.Frame()...))
		buf.Put(b)
		mc.scratch[i] = nil
	}
	return out
}

func (mc *migCore) join(a wire.Auth) *conn {
	mc.t.Helper()
	a.RoomName = mc.name
	cn := mc.c.newConn(nil)
	mc.deliver(cn, a.Marshal())
	if cn.closing.Load() {
		mc.t.Fatalf("auth %+v refused", a)
	}
	mc.drain(cn)
	return cn
}

func (mc *migCore) tuple(op wire.MigrationOp, secret, id string, gen uint64, promoted string) wire.MigrationRequest {
	return wire.MigrationRequest{Op: op, Name: mc.name, Secret: secret, ClaimID: id, Incarnation: mc.inc,
		ExpectedGeneration: gen, PromotedPlayerID: promoted}
}

// "closes every old-generation relay socket": an old host's reader that
// passed handle's closing check just before a claim committed does not act
// on the new generation (fromHost checks under the room lock that it is
// still the room's host): no kick of the promoted host's listen-client, no
// SEND_ONE to it.
func TestMigrationOldHostPacketAfterClaimDoesNotReachNewGeneration(t *testing.T) {
	mc := newMigCore(t, "old-host")
	host := mc.join(wire.Auth{ClientSecret: mc.alloc.hostSecret})
	mc.join(wire.Auth{ClientSecret: mc.alloc.pub.ClientSecret})
	g, err := mc.c.authorize(mc.tuple(wire.OpAuthorize, mc.alloc.hostSecret, "c1", 0, "7"), mc.rt)
	if err != nil {
		t.Fatal(err)
	}
	req := mc.tuple(wire.OpClaim, mc.alloc.pub.ClientSecret, "c1", 0, "7")
	req.Grant = g.Grant
	cl, err := mc.c.claim(req, mc.rt)
	if err != nil {
		t.Fatal(err)
	}
	if !host.closing.Load() {
		t.Fatal("the old host was not closed by the claim")
	}
	mc.drain(host)
	// Generation 1: the provisional host and its listen-client.
	newHost := mc.join(wire.Auth{ClientSecret: cl.Secret})
	lane := mc.join(wire.Auth{ClientSecret: mc.alloc.pub.ClientSecret, ProvisionalHostSecret: cl.Secret})
	mc.drain(newHost)

	// The old host's in-flight packets, processed after the claim.
	mc.rawFromHost(host, wire.AppendSendOne(nil, lane.id, []byte("stale host data")))
	if got := mc.drain(lane); len(got) != 0 {
		t.Errorf("the new generation's lane got %q from the fenced old host", got)
	}
	mc.rawFromHost(host, wire.AppendKick(nil, lane.id))
	if lane.closing.Load() {
		t.Errorf("the fenced old host kicked the new generation's listen-client")
	}
}

// "Reusing the same claim ID for a different tuple returns
// migration_claim_id_conflict", for a claim id of an earlier generation
// too (the incarnation remembers its claims).
func TestMigrationClaimIDReusedFromAnEarlierGenerationConflicts(t *testing.T) {
	mc := newMigCore(t, "reuse")
	client := mc.alloc.pub.ClientSecret
	if _, err := mc.c.claim(mc.tuple(wire.OpClaim, client, "A", 0, "7"), route{epoch: mc.rt.epoch}); err == nil {
		t.Fatal("a claim with the allocation's host never connected should not succeed (awaiting)")
	}
	// Vacate: the host connects, a client is there, the host leaves.
	h := mc.join(wire.Auth{ClientSecret: mc.alloc.hostSecret})
	mc.join(wire.Auth{ClientSecret: client})
	mc.c.leave(h)
	if _, err := mc.c.claim(mc.tuple(wire.OpClaim, client, "A", 0, "7"), mc.rt); err != nil {
		t.Fatal(err)
	}
	mc.clk.Advance(DefaultActivationLease)
	if _, err := mc.c.claim(mc.tuple(wire.OpClaim, client, "B", 1, "8"), mc.rt); err != nil {
		t.Fatal(err)
	}
	mc.clk.Advance(DefaultActivationLease)
	_, err := mc.c.claim(mc.tuple(wire.OpClaim, client, "A", 2, "9"), mc.rt)
	if err == nil {
		t.Fatal("claim id A, already used for the claim 0->1, was accepted again for 2->3; want migration_claim_id_conflict")
	}
	if e, _ := err.(*wire.Error); e == nil || e.Code != wire.ErrClaimIDConflict.Code {
		t.Fatalf("claim id A reused: %v, want migration_claim_id_conflict", err)
	}
}

// "A room waiting for a replacement host is reserved until that host
// connects or the empty-room timeout removes it, so allocation cannot
// replace an in-progress recovery." and "After the relay observes host
// loss, the current client credential is enough for crash recovery." At
// generation 0 the host's crash kicks every client (count 0, phase
// vacant); within the recovery window no allocation under another id
// takes the name, and the players' claim succeeds.
func TestMigrationCrashRecoveryAtGenerationZeroIsReserved(t *testing.T) {
	m := newMigRoom(t, "crash-reserved", Options{})
	m.vacate() // the host crashed with a client there: recovery starts
	if _, status, _ := allocate(t, m.s, m.name, "another-play"); status == http.StatusOK {
		t.Fatal("an allocation replaced a room whose peers are recovering from a host crash")
	}
	if _, e := m.claim("recover", 0, "5", ""); e != nil {
		t.Fatalf("the crash-recovery claim: %v", e)
	}
}

// Concurrency (run with -race): claims, provisional host auth and leave,
// activation, lease expiry and client auth/leave on one room at once. An
// isolated client's packets never reach any host, and the room's
// invariants (ConsistencyCheck) hold at the end.
func TestMigrationConcurrentLifecycle(t *testing.T) {
	mc := newMigCore(t, "storm")
	client := mc.alloc.pub.ClientSecret
	h := mc.join(wire.Auth{ClientSecret: mc.alloc.hostSecret})
	mc.join(wire.Auth{ClientSecret: client})
	mc.c.leave(h) // crash: vacant at generation 0

	const rounds = 200
	isolatedIDs := make(chan wire.ConnID, 64*rounds)
	hostGot := make(chan wire.ConnID, 64*rounds)
	stop := make(chan struct{})
	var wg syncWaitGroup
	// Claimers: read current, claim from its generation when claimable.
	claims := make(chan wire.MigrationClaim, rounds)
	for w := range 2 {
		wg.Go(func() {
			for i := range rounds {
				st, err := mc.c.migrationCurrent(wire.MigrationRequest{Op: wire.OpCurrent, Name: mc.name, Secret: client}, mc.rt)
				if err != nil {
					// An active host that leaves an empty room ends it (by design).
					if e, _ := err.(*wire.Error); e == nil || e.Code != wire.ErrRoomNotFound.Code {
						t.Error(err)
					}
					return
				}
				if st.HostPhase != wire.HostPhaseVacant && st.HostPhase != wire.HostPhaseExpired {
					continue
				}
				id := "w" + itoa(w) + "-" + itoa(i)
				c, err := mc.c.claim(mc.tuple(wire.OpClaim, client, id, st.Generation, "7"), mc.rt)
				if err == nil {
					select {
					case claims <- c:
					default:
					}
				}
			}
		})
	}
	// Promoted hosts: connect with the claimed credential, drain, maybe
	// activate, maybe leave.
	wg.Go(func() {
		for i := range rounds {
			var c wire.MigrationClaim
			select {
			case c = <-claims:
			case <-stop:
				return
			}
			hc := mc.c.newConn(nil)
			mc.deliver(hc, wire.Auth{RoomName: mc.name, ClientSecret: c.Secret}.Marshal())
			req := mc.tuple(wire.OpActivate, c.Secret, c.ClaimID, c.Generation, c.PromotedPlayerID)
			req.FencingToken = c.FencingToken
			if i%3 != 0 {
				_, _ = mc.c.activate(req, mc.rt)
			}
			for range 3 {
				for _, b := range hc.takeBatch(nil) {
					if p, err := wire.ParseToHostPacket(b.Frame()); err == nil && p.Type == wire.ToHostData {
						hostGot <- p.IDs[0]
					}
					buf.Put(b)
				}
			}
			if i%2 == 0 || hc.closing.Load() {
				hc.close(reasonPeerClosed)
				mc.c.leave(hc)
			}
		}
	})
	// Clients: join, send, leave.
	for range 4 {
		wg.Go(func() {
			for range rounds {
				cn := mc.c.newConn(nil)
				mc.deliver(cn, wire.Auth{RoomName: mc.name, ClientSecret: client}.Marshal())
				r := mc.c.rooms.get(mc.name)
				if r != nil {
					r.mu.Lock()
					if cn.isolated {
						isolatedIDs <- cn.id
					}
					r.mu.Unlock()
				}
				if !cn.closing.Load() && cn.role == roleClient {
					mc.deliver(cn, []byte("xx"))
				}
				cn.close(reasonPeerClosed)
				mc.c.leave(cn)
				for _, b := range cn.takeBatch(nil) {
					buf.Put(b)
				}
			}
		})
	}
	// Time: the lease runs out now and then.
	wg.Go(func() {
		for range rounds {
			mc.clk.Advance(7 * time.Second)
		}
	})
	wg.WaitFirst(7) // claimers, clients, clock
	close(stop)
	wg.Wait()
	close(isolatedIDs)
	close(hostGot)
	iso := map[wire.ConnID]bool{}
	for id := range isolatedIDs {
		iso[id] = true
	}
	nHost := 0
	for id := range hostGot {
		nHost++
		if iso[id] {
			t.Errorf("a host got a packet from client %d, isolated when it joined", id)
		}
	}
	t.Logf("isolated joins %d, packets at hosts %d", len(iso), nHost)
	if err := (&Server{core: mc.c}).ConsistencyCheck(); err != nil {
		t.Fatal(err)
	}
}

// syncWaitGroup runs goroutines and waits for those that end on their own
// (WaitFirst) before the rest are told to stop.
type syncWaitGroup struct {
	all []chan struct{}
}

func (g *syncWaitGroup) Go(f func()) {
	ch := make(chan struct{})
	g.all = append(g.all, ch)
	go func() { defer close(ch); f() }()
}

// WaitFirst waits for every goroutine started but the one at index 2
// (the promoted-host loop, which ends on stop); n is informational.
func (g *syncWaitGroup) WaitFirst(int) {
	for i, ch := range g.all {
		if i != 2 {
			<-ch
		}
	}
}

func (g *syncWaitGroup) Wait() {
	for _, ch := range g.all {
		<-ch
	}
}

// "The host credential rotates after every successful claim" and
// "If the relay still has a live host, a claim also requires a one-time
// grant created by that host." The exact allocation replay (same
// allocation_id, which the balancer forwards to the relay) answers
// r.hostSecret, which after a claim is the PROMOTED host's credential. The
// original allocator - after the migration just a holder of the client
// credential - replays its allocation, gets the live promoted host's
// credential, authorizes a grant for itself and seizes the live host.
func TestMigrationAllocationReplayDoesNotLeakThePromotedHostCredential(t *testing.T) {
	m := newVacantRoom(t, "replay-leak", Options{})
	c := m.mustClaim("c1", 0, "8", "")
	host := join(t, m.s, m.name, c.Secret) // the promoted host, provisional
	if _, e := m.activate(c); e != nil {
		t.Fatalf("activate: %v", e)
	}
	// The original allocator replays its allocation (same allocation id).
	a, status, e := allocate(t, m.s, m.name, "alloc-"+m.name)
	if status != http.StatusOK {
		t.Fatalf("allocation replay: %d %v", status, e)
	}
	if a.Capability.Secret == c.Secret {
		t.Errorf("the allocation replay answered the promoted host's live credential")
	}
	// What it buys: a grant from "the live host" and a claim that closes it.
	leaked := *m
	leaked.hostSecret = a.Capability.Secret
	g, ge := leaked.authorize("seize", 1, "666")
	if ge != nil {
		return // not exploitable
	}
	if _, ce := m.claim("seize", 1, "666", g.Grant); ce == nil {
		t.Errorf("a client-credential holder seized the live promoted host through the replayed allocation")
		_ = host
	}
}
