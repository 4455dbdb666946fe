package multimachine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestMultiMachineRelayApp is issue 6's "must hold", against real
// processes behind flysim's proxy, in one fleet and in order:
//
//  1. /servers lists the three-machine app once, under its public URL;
//  2. 30 rooms allocated through the balancer spread over the machines;
//  3. every room's host and two clients, without the hint (so on random
//     machines), exchange packets both ways with the right ids and notices;
//     a room whose host landed elsewhere moved to the host's machine (the
//     balancer's view agrees with the machines' handover counts), some
//     clients were forwarded, some not; clients with the hint that reach
//     the wrong machine are replayed to the holder (Fly-Replay);
//  4. scale 3 -> 4 through the Machines API: every room keeps working on
//     its connections, new clients landing on the new machine join, and new
//     rooms land on the new machine;
//  5. scale 4 -> 2 (the new machine stopped, gracefully; an original one
//     killed), with the hosts where they landed: every room held by a
//     survivor keeps its host and carries on; its clients that came in
//     through a stopped machine are closed promptly (1012 from the drained
//     one, dropped at once for the killed one) and the host hears them
//     leave; the stopped machines' rooms end (their hosts, and clients
//     forwarded to them from a survivor, closed the same way: a forwarded
//     connection whose holder dies is dropped at once) and are gone at the
//     balancer (/join: room_not_found).
func TestMultiMachineRelayApp(t *testing.T) {
	began := time.Now()
	f := startFleet(t)
	machines := f.relayMachines("started")
	if len(machines) != 3 {
		t.Fatalf("the relay app runs %d machines, want 3", len(machines))
	}
	f.waitMachines(machines)
	t.Logf("fleet up in %v (machines %v)", time.Since(began).Round(time.Millisecond), machines)

	var games []*game
	t.Cleanup(func() {
		for _, g := range games {
			g.closeNow()
		}
	})
	ctx := f.ctx(80 * time.Second)

	if !t.Run("servers list the app once", func(t *testing.T) {
		servers, err := f.api.Servers(f.ctx(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range servers {
			if s.APIEndpoint == f.relayURL {
				n++
				if s.Region != region {
					t.Errorf("app listed in region %q", s.Region)
				}
			}
		}
		if n != 1 || len(servers) != 1 {
			t.Fatalf("/servers = %+v, want the app once (apiEndpoint %s)", servers, f.relayURL)
		}
		// A relay's metrics are not for the internet: through the public
		// proxy they want the operator's secret.
		resp, err := f.hc.Get(f.relayURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("relay /metrics through the proxy without the secret: %d, want 401", resp.StatusCode)
		}
	}) {
		return
	}

	if !t.Run("30 rooms spread over the machines", func(t *testing.T) {
		perMachine := map[string]int{}
		for i := range 30 {
			g := f.allocate(fmt.Sprintf("room-%02d", i))
			games = append(games, g)
			perMachine[g.holder]++
		}
		for _, m := range machines {
			if perMachine[m] == 0 {
				t.Fatalf("machine %s holds no room: %v", m, perMachine)
			}
		}
		t.Logf("rooms per machine: %v", perMachine)
	}) {
		return
	}

	if !t.Run("hintless hosts and clients on random machines", func(t *testing.T) {
		handovers := f.sumMetric(machines, "purrfly_relay_mesh_handovers_total", `result="ok"`)
		err := each(ctx, games, func(ctx context.Context, g *game) error {
			if err := f.connectHost(ctx, g, ""); err != nil {
				return err
			}
			for range 2 {
				if err := f.addClient(ctx, g, ""); err != nil {
					return err
				}
			}
			return g.exchange(ctx, 1)
		})
		if err != nil {
			t.Fatal(err)
		}
		// A host that lands on another machine than its (empty) room's
		// takes the room with it; only clients are forwarded.
		moved := f.settleHolders(t, games, machines, handovers)
		forwarded := f.sumMetric(machines, "purrfly_relay_mesh_forwards_total", `result="ok"`)
		// 30 hosts on random machines of three: about 20 rooms move; 60
		// clients: about 40 forwarded.
		if moved < 3 || moved > 29 || forwarded < 10 || forwarded > 60 {
			t.Fatalf("%d of 30 rooms moved to their host, %v of 60 clients forwarded; want most but not all of each", moved, forwarded)
		}
		t.Logf("%d of 30 rooms followed their host; %v of 60 hintless clients were forwarded to their room's machine", moved, forwarded)
	}) {
		return
	}

	if !t.Run("hinted clients are replayed to the holder", func(t *testing.T) {
		// The Go client's ?s= hint, sent to a machine that does not hold
		// the room: Fly-Replay to the holder before the upgrade, no
		// forwarding.
		sum := func(name, label string) float64 { return f.sumMetric(machines, name, label) }
		replays := sum("purrfly_relay_mesh_routes_total", `decision="replay"`)
		forwards := sum("purrfly_relay_mesh_forwards_total", `result="ok"`)
		some := games[:6]
		err := each(ctx, some, func(ctx context.Context, g *game) error {
			other := machines[0]
			if other == g.holder {
				other = machines[1]
			}
			if err := f.addClientWith(ctx, g, f.hintedOpts(other)); err != nil {
				return err
			}
			return g.exchange(ctx, 2)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := sum("purrfly_relay_mesh_routes_total", `decision="replay"`) - replays; got != float64(len(some)) {
			t.Fatalf("%v Fly-Replay decisions for %d hinted clients on the wrong machine", got, len(some))
		}
		if got := sum("purrfly_relay_mesh_forwards_total", `result="ok"`) - forwards; got != 0 {
			t.Fatalf("%v hinted clients were forwarded instead of replayed", got)
		}
	}) {
		return
	}

	if !t.Run("UDP players reach rooms on every machine", func(t *testing.T) {
		// All of an app's UDP reaches one machine (as on Fly): a UDP client
		// of a room held elsewhere is forwarded over the mesh, and a UDP
		// host takes its empty room along to the machine it reached.
		sum := func(name, label string) float64 { return f.sumMetric(machines, name, label) }
		forwards := sum("purrfly_relay_mesh_forwards_total", `result="ok"`)
		udpOpts := &client.DialOptions{Transport: client.TransportUDP}
		some := games[6:12]
		err := each(ctx, some, func(ctx context.Context, g *game) error {
			if err := f.addClientWith(ctx, g, udpOpts); err != nil {
				return err
			}
			if err := g.exchange(ctx, 2); err != nil {
				return err
			}
			last := len(g.clients) - 1
			c, id := g.clients[last], g.ids[last]
			if err := c.Close(); err != nil {
				return fmt.Errorf("room %s: UDP client close: %w", g.name, err)
			}
			return g.expectLeft(ctx, id)
		})
		if err != nil {
			t.Fatal(err)
		}
		holders := map[string]bool{}
		for _, g := range some {
			holders[g.holder] = true
		}
		got := sum("purrfly_relay_mesh_forwards_total", `result="ok"`) - forwards
		if len(holders) > 1 && got == 0 {
			t.Fatalf("UDP clients of rooms on %d machines were never forwarded", len(holders))
		}
		t.Logf("%v of %d UDP clients were forwarded to their room's machine", got, len(some))

		g := f.allocate("udp-host-room")
		h, err := client.DialHost(ctx, g.hostCap, g.name, udpOpts)
		if err != nil {
			t.Fatal(err)
		}
		g.host = h
		defer g.closeNow()
		for _, o := range []*client.DialOptions{udpOpts, f.dialOpts("")} {
			if err := f.addClientWith(ctx, g, o); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.exchange(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}

	if !t.Run("host migration across the machines", func(t *testing.T) {
		// The migration smoke (what `purrctl smoke --migration` runs):
		// hintless over WebSocket, as PurrNet connects, so a promoted host
		// usually reaches another machine than its pending room's and is
		// forwarded there (a room in a migration phase never moves); and
		// over UDP, where everything reaches the app's one UDP machine.
		sum := func() float64 { return f.sumMetric(machines, "purrfly_relay_mesh_forwards_total", `result="ok"`) }
		forwards := sum()
		for i, tr := range []client.Transport{client.TransportWebSocket, client.TransportWebSocket, client.TransportWebSocket, client.TransportUDP} {
			rep, err := client.SmokeMigration(ctx, client.SmokeOptions{Balancer: f.balURL, Transport: tr, HTTPClient: f.hc,
				NoSessionHint: true, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatalf("run %d over %s: %v (passed %v)", i, tr, err, rep.Steps)
			}
		}
		t.Logf("%v connections of the migration runs were forwarded to their room's machine", sum()-forwards)
	}) {
		return
	}

	var added string
	if !t.Run("scale 3 to 4", func(t *testing.T) {
		added = f.launch(machines[0])
		f.waitMachines(append(slices.Clone(machines), added))
		err := each(ctx, games, func(ctx context.Context, g *game) error {
			if err := g.exchange(ctx, 2); err != nil {
				return fmt.Errorf("existing connections after scale-up: %w", err)
			}
			if err := f.addClient(ctx, g, added); err != nil { // lands on the new machine, no hint
				return err
			}
			return g.exchange(ctx, 3)
		})
		if err != nil {
			t.Fatal(err)
		}
		var fresh []*game
		for i := range 8 {
			fresh = append(fresh, f.allocate(fmt.Sprintf("after-up-%d", i)))
		}
		games = append(games, fresh...)
		onNew := 0
		for _, g := range fresh {
			if g.holder == added {
				onNew++
			}
		}
		if onNew == 0 {
			t.Fatal("no new room landed on the new machine")
		}
		t.Logf("%d of 8 new rooms landed on the new machine %s", onNew, added)
		err = each(ctx, fresh, func(ctx context.Context, g *game) error {
			// Through the machine the balancer chose (still no hint), so
			// the new machine keeps the rooms it was given. A host landing
			// elsewhere would take its room along (step 3 shows that); the
			// balancer's placement is where a hintless host's room starts.
			if err := f.connectHost(ctx, g, g.holder); err != nil {
				return err
			}
			if err := f.addClient(ctx, g, ""); err != nil {
				return err
			}
			return g.exchange(ctx, 1)
		})
		if err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}

	t.Run("scale 4 to 2", func(t *testing.T) {
		killed, drained := machines[0], added
		survivors := []string{machines[1], machines[2]}
		byHolder := map[string][]*game{}
		for _, g := range games {
			byHolder[g.holder] = append(byHolder[g.holder], g)
		}
		if len(byHolder[killed]) == 0 || len(byHolder[drained]) == 0 {
			t.Fatalf("the machines to stop hold no room: %v", byHolder)
		}
		survivorGames := append(slices.Clone(byHolder[survivors[0]]), byHolder[survivors[1]]...)
		// Hosts stay where they landed. The clients of the surviving rooms
		// are replaced by three with known ways in (still without the
		// hint): one through a survivor, one through the machine that will
		// be killed, one through the machine that will drain.
		through := map[*game][3]wire.ConnID{}
		var throughMu sync.Mutex
		err := each(ctx, survivorGames, func(ctx context.Context, g *game) error {
			for len(g.clients) > 0 {
				c, id := g.clients[0], g.ids[0]
				if err := c.Close(); err != nil {
					return fmt.Errorf("room %s: client close: %w", g.name, err)
				}
				if err := g.expectLeft(ctx, id); err != nil {
					return err
				}
			}
			var ids [3]wire.ConnID
			for i, edge := range []string{survivors[0], killed, drained} {
				if err := f.addClient(ctx, g, edge); err != nil {
					return err
				}
				ids[i] = g.ids[i]
			}
			throughMu.Lock()
			through[g] = ids
			throughMu.Unlock()
			return g.exchange(ctx, 4)
		})
		if err != nil {
			t.Fatal(err)
		}

		// One more client of every doomed room comes in through a
		// survivor, so it is forwarded to the machine about to stop.
		var doomed []*game
		for _, m := range []string{killed, drained} {
			doomed = append(doomed, byHolder[m]...)
		}
		if err := each(ctx, doomed, func(ctx context.Context, g *game) error {
			return f.addClient(ctx, g, survivors[0])
		}); err != nil {
			t.Fatal(err)
		}

		// Watch the doomed rooms' hosts and forwarded clients, and the
		// surviving rooms' clients that go through a stopped machine.
		type ended struct {
			what, machine string
			status        int
			at            time.Time
			err           error
		}
		var mu sync.Mutex
		var ends []ended
		var wg sync.WaitGroup
		watch := func(what, machine string, next func(context.Context) error) {
			wg.Go(func() {
				st, at, err := closedWithin(f.ctx(20*time.Second), next)
				mu.Lock()
				ends = append(ends, ended{what, machine, st, at, err})
				mu.Unlock()
			})
		}
		for _, m := range []string{killed, drained} {
			for _, g := range byHolder[m] {
				watch("host of room "+g.name, m, func(ctx context.Context) error { _, err := g.host.Next(ctx); return err })
				fwd := g.clients[len(g.clients)-1]
				watch("forwarded client of room "+g.name, m, func(ctx context.Context) error { _, err := fwd.Recv(ctx); return err })
			}
		}
		for _, g := range survivorGames {
			viaKilled, viaDrained := g.clients[1], g.clients[2]
			watch("client of room "+g.name, killed, func(ctx context.Context) error { _, err := viaKilled.Recv(ctx); return err })
			watch("client of room "+g.name, drained, func(ctx context.Context) error { _, err := viaDrained.Recv(ctx); return err })
		}
		stopAt := time.Now()
		f.stop(killed, "SIGKILL")
		f.stop(drained, "")
		wg.Wait()
		var slowest time.Duration
		for _, e := range ends {
			switch {
			case e.err != nil:
				t.Errorf("%s on stopped machine %s: %v", e.what, e.machine, e.err)
			case e.machine == killed && (e.status != -1 || e.at.Sub(stopAt) > 3*time.Second):
				t.Errorf("%s through the killed machine: closed with %d after %v, want dropped within 3s",
					e.what, e.status, e.at.Sub(stopAt))
			case e.machine == drained && e.status != client.StatusServiceRestart:
				t.Errorf("%s through the drained machine: closed with %d, want 1012", e.what, e.status)
			}
			if e.machine == killed {
				slowest = max(slowest, e.at.Sub(stopAt))
			}
		}
		t.Logf("connections to or through the killed machine closed within %v", slowest.Round(time.Millisecond))
		f.waitStopped(killed)
		f.waitStopped(drained)
		f.waitMachines(survivors)

		for _, m := range []string{killed, drained} {
			for _, g := range byHolder[m] {
				testutil.Eventually(t, 10*time.Second, "room "+g.name+" of a stopped machine to be gone", func() bool {
					_, err := f.api.Join(f.ctx(5*time.Second), g.name)
					return errors.Is(err, wire.ErrRoomNotFound) && f.locate(g.name) == ""
				})
			}
		}
		list, err := f.api.List(f.ctx(5*time.Second), 0)
		if err != nil {
			t.Fatal(err)
		}
		if list.Total != len(survivorGames) {
			t.Errorf("/list total %d, want the %d rooms of the survivors", list.Total, len(survivorGames))
		}

		// Every surviving room carries on: its host hears that the two
		// clients through stopped machines left, the rest keep playing,
		// and newcomers (random survivors, no hint) join.
		err = each(ctx, survivorGames, func(ctx context.Context, g *game) error {
			ids := through[g]
			if err := g.expectLeftAny(ctx, ids[1], ids[2]); err != nil {
				return err
			}
			if err := g.exchange(ctx, 5); err != nil {
				return fmt.Errorf("surviving room after scale-down: %w", err)
			}
			if err := f.addClient(ctx, g, ""); err != nil {
				return err
			}
			return g.exchange(ctx, 6)
		})
		if err != nil {
			t.Fatal(err)
		}
		servers, err := f.api.Servers(f.ctx(5 * time.Second))
		if err != nil || len(servers) != 1 {
			t.Fatalf("/servers after scale-down = %+v, %v", servers, err)
		}
	})
	t.Logf("whole scenario took %v", time.Since(began).Round(time.Millisecond))
}
