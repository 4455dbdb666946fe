package flyaffinity

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/wire"
)

func upgradeRequest(sid wire.SessionID) *http.Request {
	return httptest.NewRequest(http.MethodGet, "/ws?"+wire.SessionQueryParam+"="+sid.Hint(), nil)
}

func ownerOf(tb testing.TB, r *Resolver, sid wire.SessionID) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o, err := r.Owner(ctx, sid)
	if err != nil {
		tb.Fatalf("Owner(%q): %v", sid, err)
	}
	return o
}

// Three and five machines, each with its own Resolver against the same DNS,
// agree on every owner; exactly the owner serves a session and every other
// machine hands it to the owner.
func TestMachinesAgreeOnOwners(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d machines", n), func(t *testing.T) {
			ids := machineIDs(n)
			f := startDNS(t, txtValue(ids...))
			rs := make([]*Resolver, n)
			for i, id := range ids {
				rs[i] = newTestResolver(t, testConfig(f, id))
			}
			owned := map[string]int{}
			for k := range 2000 {
				sid := wire.SessionID(fmt.Sprintf("room-%d", k))
				owner := ownerOf(t, rs[0], sid)
				owned[owner]++
				for i, r := range rs {
					if o := ownerOf(t, r, sid); o != owner {
						t.Fatalf("session %q: machine %s says owner %s, machine %s says %s", sid, ids[0], owner, ids[i], o)
					}
					got := r.Route(sid, upgradeRequest(sid))
					want := wire.RouteResult{Instance: owner}
					if ids[i] == owner {
						want = wire.RouteResult{Serve: true}
					}
					if got != want {
						t.Fatalf("session %q on %s: Route = %+v, want %+v", sid, ids[i], got, want)
					}
				}
			}
			for _, id := range ids {
				if owned[id] < 2000/n/2 {
					t.Errorf("machine %s owns only %d of 2000 sessions", id, owned[id])
				}
			}
		})
	}
}

func TestRouteDecisions(t *testing.T) {
	ids := machineIDs(4)
	f := startDNS(t, txtValue(ids...))
	reg := prometheus.NewRegistry()
	cfg := testConfig(f, ids[0])
	cfg.Metrics = reg
	r := newTestResolver(t, cfg)

	// A session owned elsewhere, and one owned here.
	var elsewhere, here wire.SessionID
	for k := 0; elsewhere == "" || here == ""; k++ {
		sid := wire.SessionID(fmt.Sprintf("room-%d", k))
		if ownerOf(t, r, sid) == ids[0] {
			here = sid
		} else {
			elsewhere = sid
		}
	}
	serve := wire.RouteResult{Serve: true}

	if got := r.Route(here, upgradeRequest(here)); got != serve {
		t.Errorf("owned session: Route = %+v, want serve", got)
	}
	if got, want := r.Route(elsewhere, upgradeRequest(elsewhere)), ownerOf(t, r, elsewhere); got.Serve || got.Instance != want {
		t.Errorf("session owned by %s: Route = %+v, want hand-off", want, got)
	}
	if got := r.Route("", httptest.NewRequest(http.MethodGet, "/ws", nil)); got != serve {
		t.Errorf("no session hint: Route = %+v, want serve", got)
	}
	replayed := upgradeRequest(elsewhere)
	replayed.Header.Set(wire.HeaderFlyReplaySrc, "instance="+ids[1]+";region=ams;t=1700000000000000")
	if got := r.Route(elsewhere, replayed); got != serve {
		t.Errorf("replayed request: Route = %+v, want serve (one hop only)", got)
	}
	if got := r.Route(elsewhere, nil); got.Serve {
		t.Errorf("nil request owned elsewhere: Route = %+v, want hand-off", got)
	}

	for decision, want := range map[string]float64{"owner": 1, "handoff": 2, "no_hint": 1, "replayed": 1} {
		if got := counter(t, reg, "purrfly_flyaffinity_route_decisions_total", "decision", decision); got != want {
			t.Errorf("route decisions %s = %v, want %v", decision, got, want)
		}
	}
}

// Off Fly (no machine id) every request is served here, whatever DNS says,
// and no lookup is made.
func TestRouteOffFlyServes(t *testing.T) {
	ids := machineIDs(5)
	f := startDNS(t, txtValue(ids...))
	r := newTestResolver(t, testConfig(f, ""))
	for k := range 200 {
		sid := wire.SessionID(fmt.Sprintf("room-%d", k))
		if got := r.Route(sid, upgradeRequest(sid)); !got.Serve {
			t.Fatalf("off Fly: Route(%q) = %+v, want serve", sid, got)
		}
	}
	if q := f.queries.Load(); q != 0 {
		t.Fatalf("off Fly Route made %d DNS queries, want 0", q)
	}
	// Owner still answers over the DNS set, for tools.
	if o := ownerOf(t, r, "room-1"); !slices.Contains(ids, o) {
		t.Fatalf("Owner off Fly = %q, want one of the listed machines", o)
	}
}

// One machine in the set: serve everything.
func TestRouteSingleMachineServes(t *testing.T) {
	f := startDNS(t, "148e21dad76789 sea")
	r := newTestResolver(t, testConfig(f, "148e21dad76789"))
	for k := range 200 {
		sid := wire.SessionID(fmt.Sprintf("room-%d", k))
		if got := r.Route(sid, upgradeRequest(sid)); !got.Serve {
			t.Fatalf("single machine: Route(%q) = %+v, want serve", sid, got)
		}
	}
}

// A machine that DNS does not list yet counts itself in: it serves the
// sessions it will own once DNS lists it and hands the others to the owners
// they will have then. Peers never lists it.
func TestJustBootedCountsItselfIn(t *testing.T) {
	ids := machineIDs(4)
	newcomer := ids[3]
	f := startDNS(t, txtValue(ids[:3]...))
	fake := newFakeClock()
	cfg := testConfig(f, newcomer)
	cfg.Clock = fake
	r := newTestResolver(t, cfg)

	if peers := peersOf(t, r); len(peers) != 3 {
		t.Fatalf("peers of the newcomer = %q, want the 3 listed machines", peers)
	}
	full := newPeerSet(ids, "", "purr-relay", 8080)
	served := 0
	before := map[wire.SessionID]wire.RouteResult{}
	for k := range 1000 {
		sid := wire.SessionID(fmt.Sprintf("room-%d", k))
		want := full.owner(keyHash(string(sid)))
		got := r.Route(sid, upgradeRequest(sid))
		before[sid] = got
		if want == newcomer {
			served++
			if !got.Serve {
				t.Fatalf("session %q will be the newcomer's: Route = %+v, want serve", sid, got)
			}
		} else if got.Serve || got.Instance != want {
			t.Fatalf("session %q belongs to %s: Route = %+v", sid, want, got)
		}
	}
	if served == 0 {
		t.Fatal("the newcomer served no session")
	}

	// DNS catches up: nothing changes for the newcomer.
	f.set(txtValue(ids...))
	fake.Advance(cfg.TTL)
	for sid, was := range before {
		if got := r.Route(sid, upgradeRequest(sid)); got != was {
			t.Fatalf("session %q: Route changed from %+v to %+v once DNS listed the newcomer", sid, was, got)
		}
	}
	if q := f.queries.Load(); q != 2 {
		t.Fatalf("DNS saw %d queries, want 2", q)
	}
}
