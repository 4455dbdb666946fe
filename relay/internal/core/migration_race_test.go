package core

import (
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
	c       *Core
	clk     *clock.Fake
	name    string
	alloc   Allocation
	rt      Route
	inc     string
	scratch []*buf.Buf
}

func newMigCore(t *testing.T, name string) *migCore {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	c := testCore(t, clk)
	a, err := c.Allocate(name, "alloc-"+name)
	if err != nil {
		t.Fatal(err)
	}
	mc := &migCore{t: t, c: c, clk: clk, name: name, alloc: a, rt: Route{Epoch: a.Pub.Epoch}}
	st, err := c.MigrationCurrent(wire.MigrationRequest{Op: wire.OpCurrent, Name: name, Secret: a.Pub.ClientSecret}, mc.rt)
	if err != nil {
		t.Fatal(err)
	}
	mc.inc = st.Incarnation
	return mc
}

// deliver hands msg to the core as cn's reader would.
func (mc *migCore) deliver(cn *Conn, msg []byte) {
	b := buf.Get(buf.Headroom + len(msg))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], msg)
	mc.c.Handle(cn, b)
}

// raw is deliver without handle's entry check (cn.closing): what a
// reader does that passed that check just before another goroutine
// closed cn.
func (mc *migCore) rawFromHost(cn *Conn, msg []byte) {
	b := buf.Get(buf.Headroom + len(msg))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], msg)
	mc.c.fromHost(cn, b)
}

func (mc *migCore) drain(cn *Conn) [][]byte {
	mc.scratch = cn.TakeBatch(mc.scratch[:0])
	var out [][]byte
	for i, b := range mc.scratch {
		out = append(out, append([]byte(nil), b.Frame()...))
		buf.Put(b)
		mc.scratch[i] = nil
	}
	return out
}

func (mc *migCore) join(a wire.Auth) *Conn {
	mc.t.Helper()
	a.RoomName = mc.name
	cn := mc.c.NewConn(nil)
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
	host := mc.join(wire.Auth{ClientSecret: mc.alloc.HostSecret})
	mc.join(wire.Auth{ClientSecret: mc.alloc.Pub.ClientSecret})
	g, err := mc.c.Authorize(mc.tuple(wire.OpAuthorize, mc.alloc.HostSecret, "c1", 0, "7"), mc.rt)
	if err != nil {
		t.Fatal(err)
	}
	req := mc.tuple(wire.OpClaim, mc.alloc.Pub.ClientSecret, "c1", 0, "7")
	req.Grant = g.Grant
	cl, err := mc.c.Claim(req, mc.rt)
	if err != nil {
		t.Fatal(err)
	}
	if !host.closing.Load() {
		t.Fatal("the old host was not closed by the claim")
	}
	mc.drain(host)
	// Generation 1: the provisional host and its listen-client.
	newHost := mc.join(wire.Auth{ClientSecret: cl.Secret})
	lane := mc.join(wire.Auth{ClientSecret: mc.alloc.Pub.ClientSecret, ProvisionalHostSecret: cl.Secret})
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

// A claim id used again with other values is migration_claim_id_conflict,
// for a claim id of an earlier generation
// too (the incarnation remembers its claims).
func TestMigrationClaimIDReusedFromAnEarlierGenerationConflicts(t *testing.T) {
	mc := newMigCore(t, "reuse")
	client := mc.alloc.Pub.ClientSecret
	if _, err := mc.c.Claim(mc.tuple(wire.OpClaim, client, "A", 0, "7"), Route{Epoch: mc.rt.Epoch}); err == nil {
		t.Fatal("a claim with the allocation's host never connected should not succeed (awaiting)")
	}
	// Vacate: the host connects, a client is there, the host leaves.
	h := mc.join(wire.Auth{ClientSecret: mc.alloc.HostSecret})
	mc.join(wire.Auth{ClientSecret: client})
	mc.c.Leave(h)
	if _, err := mc.c.Claim(mc.tuple(wire.OpClaim, client, "A", 0, "7"), mc.rt); err != nil {
		t.Fatal(err)
	}
	mc.clk.Advance(DefaultActivationLease)
	if _, err := mc.c.Claim(mc.tuple(wire.OpClaim, client, "B", 1, "8"), mc.rt); err != nil {
		t.Fatal(err)
	}
	mc.clk.Advance(DefaultActivationLease)
	_, err := mc.c.Claim(mc.tuple(wire.OpClaim, client, "A", 2, "9"), mc.rt)
	if err == nil {
		t.Fatal("claim id A, already used for the claim 0->1, was accepted again for 2->3; want migration_claim_id_conflict")
	}
	if e, _ := err.(*wire.Error); e == nil || e.Code != wire.ErrClaimIDConflict.Code {
		t.Fatalf("claim id A reused: %v, want migration_claim_id_conflict", err)
	}
}

// Concurrency (run with -race): claims, provisional host auth and leave,
// activation, lease expiry and client auth/leave on one room at once. An
// isolated client's packets never reach any host, and the room's
// invariants (ConsistencyCheck) hold at the end.
func TestMigrationConcurrentLifecycle(t *testing.T) {
	mc := newMigCore(t, "storm")
	client := mc.alloc.Pub.ClientSecret
	h := mc.join(wire.Auth{ClientSecret: mc.alloc.HostSecret})
	mc.join(wire.Auth{ClientSecret: client})
	mc.c.Leave(h) // crash: vacant at generation 0

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
				st, err := mc.c.MigrationCurrent(wire.MigrationRequest{Op: wire.OpCurrent, Name: mc.name, Secret: client}, mc.rt)
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
				c, err := mc.c.Claim(mc.tuple(wire.OpClaim, client, id, st.Generation, "7"), mc.rt)
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
			hc := mc.c.NewConn(nil)
			mc.deliver(hc, wire.Auth{RoomName: mc.name, ClientSecret: c.Secret}.Marshal())
			req := mc.tuple(wire.OpActivate, c.Secret, c.ClaimID, c.Generation, c.PromotedPlayerID)
			req.FencingToken = c.FencingToken
			if i%3 != 0 {
				_, _ = mc.c.Activate(req, mc.rt)
			}
			for range 3 {
				for _, b := range hc.TakeBatch(nil) {
					if p, err := wire.ParseToHostPacket(b.Frame()); err == nil && p.Type == wire.ToHostData {
						hostGot <- p.IDs[0]
					}
					buf.Put(b)
				}
			}
			if i%2 == 0 || hc.closing.Load() {
				hc.Close(ReasonPeerClosed)
				mc.c.Leave(hc)
			}
		}
	})
	// Clients: join, send, leave.
	for range 4 {
		wg.Go(func() {
			for range rounds {
				cn := mc.c.NewConn(nil)
				mc.deliver(cn, wire.Auth{RoomName: mc.name, ClientSecret: client}.Marshal())
				r := mc.c.rooms.get(mc.name)
				if r != nil {
					r.mu.Lock()
					if cn.isolated {
						isolatedIDs <- cn.id
					}
					r.mu.Unlock()
				}
				if !cn.closing.Load() && cn.role == RoleClient {
					mc.deliver(cn, []byte("xx"))
				}
				cn.Close(ReasonPeerClosed)
				mc.c.Leave(cn)
				for _, b := range cn.TakeBatch(nil) {
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
	if err := mc.c.ConsistencyCheck(); err != nil {
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
