package rollout_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// games plays PurrNet games against a fleet, as PurrNet connects: an
// allocation and joins retried on PurrNet's schedule (10 tries, 1 s apart,
// the same allocation_id), hosts and clients connecting without the
// session hint, over WebSocket, UDP or both, and never retrying a
// connect. Every game exchanges data between its host and two clients
// until end is called, then its clients leave and its host after them.
// It counts what a player would notice: failed allocations, failed joins,
// interrupted games.
type games struct {
	t   *testing.T
	bal *client.Balancer
	hc  *http.Client

	stop chan struct{} // closed by end
	cut  bool          // the games are expected to be cut off: end does not count it as a failure
	wg   sync.WaitGroup
	seq  atomic.Int64

	mu          sync.Mutex // guards the fields below
	started     int
	ended       int
	allocFailed []string
	joinFailed  []string
	interrupted []string
	retried     []time.Duration // allocations that needed more than one try: how long they took
	retryWhy    []string        // and why their first try failed
}

// kinds of games: host and clients over WebSocket, over UDP, and a
// WebSocket host with UDP clients.
var gameKinds = [][2]client.Transport{
	{client.TransportWebSocket, client.TransportWebSocket},
	{client.TransportUDP, client.TransportUDP},
	{client.TransportWebSocket, client.TransportUDP},
}

func newGames(t *testing.T, f *fleet) *games {
	return &games{t: t, bal: &client.Balancer{BaseURL: f.env.Balancer.URL, HTTP: f.hc, Timeout: 5 * time.Second},
		hc: f.hc, stop: make(chan struct{})}
}

// startN starts n games in region, one of each kind in turn, and waits
// until each is playing (or failed).
func (g *games) startN(region string, n int) {
	var ready sync.WaitGroup
	for range n {
		ready.Add(1)
		g.start(region, &ready)
	}
	ready.Wait()
}

// start starts one game in region; ready (if not nil) is done once it
// plays or failed.
func (g *games) start(region string, ready *sync.WaitGroup) {
	i := g.seq.Add(1)
	kind := gameKinds[int(i)%len(gameKinds)]
	name := fmt.Sprintf("game-%03d-%s", i, region)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.play(name, region, kind, ready)
	}()
}

func (g *games) note(list *[]string, format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	*list = append(*list, fmt.Sprintf(format, args...))
}

// play is one game's life.
func (g *games) play(name, region string, kind [2]client.Transport, ready *sync.WaitGroup) {
	done := func() {
		if ready != nil {
			ready.Done()
			ready = nil
		}
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	allocID := client.NewAllocationID()
	var hostCap wire.Capability
	tries, start := 0, time.Now() // wall clock: measured, never asserted
	var first error
	err := client.Retry{}.Do(ctx, func(ctx context.Context) error {
		tries++
		c, err := g.bal.Allocate(ctx, region, name, allocID)
		hostCap = c
		if first == nil {
			first = err
		}
		return err
	})
	if err != nil {
		g.note(&g.allocFailed, "%s: %v", name, err)
		return
	}
	if tries > 1 {
		g.mu.Lock()
		g.retried = append(g.retried, time.Since(start))
		g.retryWhy = append(g.retryWhy, fmt.Sprintf("%s at %s after %d tries: first %v", name, start.Format("15:04:05.000"), tries, first))
		g.mu.Unlock()
	}
	dial := func(tr client.Transport) *client.DialOptions {
		return &client.DialOptions{NoSessionHint: true, HTTPClient: g.hc, Transport: tr}
	}
	dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
	defer dcancel()
	host, err := client.DialHost(dctx, hostCap, name, dial(kind[0]))
	if err != nil {
		g.note(&g.joinFailed, "%s: host (%s): %v", name, kind[0], err)
		return
	}
	defer host.CloseNow()
	var joinCap wire.Capability
	if err := (client.Retry{}).Do(ctx, func(ctx context.Context) error {
		c, err := g.bal.Join(ctx, name)
		joinCap = c
		return err
	}); err != nil {
		g.note(&g.joinFailed, "%s: join: %v", name, err)
		return
	}
	var clients []*client.Client
	var ids []wire.ConnID
	defer func() {
		for _, c := range clients {
			c.CloseNow()
		}
	}()
	for j := range 2 {
		c, err := client.DialClient(dctx, joinCap, name, dial(kind[1]))
		if err != nil {
			g.note(&g.joinFailed, "%s: client %d (%s): %v", name, j, kind[1], err)
			return
		}
		clients = append(clients, c)
		p, err := host.Next(dctx)
		if err != nil || p.Type != wire.ToHostConnected || len(p.IDs) != 1 {
			g.note(&g.joinFailed, "%s: host did not hear client %d: %+v %v", name, j, p, err)
			return
		}
		ids = append(ids, p.IDs[0])
	}
	g.mu.Lock()
	g.started++
	g.mu.Unlock()
	done()
	for round := 0; ; round++ {
		select {
		case <-g.stop:
			g.leave(ctx, name, host, clients, ids)
			return
		case <-time.After(400 * time.Millisecond): // wall clock: the game's own pace
		}
		if err := exchangeRound(ctx, host, clients, ids, round); err != nil {
			g.note(&g.interrupted, "%s (%s host, %s clients) round %d at %s: %v (close status %d)",
				name, kind[0], kind[1], round, time.Now().Format("15:04:05.000"), err, client.CloseStatus(err))
			return
		}
	}
}

// exchangeRound sends one payload from the host to each client and one
// from each client to the host, and checks they arrive.
func exchangeRound(ctx context.Context, host *client.Host, clients []*client.Client, ids []wire.ConnID, round int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i, c := range clients {
		want := fmt.Appendf(nil, "h%d>%d", round, i)
		if err := host.SendOne(ctx, ids[i], want); err != nil {
			return fmt.Errorf("host send: %w", err)
		}
		got, err := c.Recv(ctx)
		if err != nil {
			return fmt.Errorf("client %d receive: %w", i, err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("client %d got %q, want %q", i, got, want)
		}
		up := fmt.Appendf(nil, "c%d>h%d", i, round)
		if err := c.Send(ctx, up); err != nil {
			return fmt.Errorf("client %d send: %w", i, err)
		}
		p, err := host.Next(ctx)
		if err != nil {
			return fmt.Errorf("host receive: %w", err)
		}
		if p.Type != wire.ToHostData || !bytes.Equal(p.Payload, up) || len(p.IDs) != 1 || p.IDs[0] != ids[i] {
			return fmt.Errorf("host got %+v, want %q from %d", p, up, ids[i])
		}
	}
	return nil
}

// leave ends a game as players do: the clients leave (the host hears each
// go), then the host; the room ends with its host.
func (g *games) leave(ctx context.Context, name string, host *client.Host, clients []*client.Client, ids []wire.ConnID) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for i, c := range clients {
		if err := c.Close(); err != nil {
			g.note(&g.interrupted, "%s: client %d leaving: %v", name, i, err)
			return
		}
		p, err := host.Next(ctx)
		if err != nil || p.Type != wire.ToHostDisconnected || len(p.IDs) != 1 || p.IDs[0] != ids[i] {
			g.note(&g.interrupted, "%s: host did not hear client %d leave: %+v %v", name, i, p, err)
			return
		}
	}
	if err := host.Close(); err != nil && !errors.Is(err, context.Canceled) {
		g.note(&g.interrupted, "%s: host leaving: %v", name, err)
		return
	}
	g.mu.Lock()
	g.ended++
	g.mu.Unlock()
}

// keepStarting starts a game in each region every interval until stop is
// closed (at most max games), then returns.
func (g *games) keepStarting(regions []string, interval time.Duration, max int, stop <-chan struct{}) {
	// Once stopped, it returns when the games it started play (or failed):
	// no player is left halfway through connecting.
	var ready sync.WaitGroup
	defer ready.Wait()
	for n := 0; n < max; {
		for _, r := range regions {
			ready.Add(1)
			g.start(r, &ready)
			n++
		}
		select {
		case <-stop:
			return
		case <-time.After(interval): // wall clock: the players' arrivals
		}
	}
}

// end stops every game cleanly and waits for them, then reports what went
// wrong.
func (g *games) end() {
	g.t.Helper()
	close(g.stop)
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.allocFailed {
		g.t.Errorf("failed allocation: %s", s)
	}
	for _, s := range g.joinFailed {
		g.t.Errorf("failed join: %s", s)
	}
	for _, s := range g.interrupted {
		if !g.cut {
			g.t.Errorf("interrupted game: %s", s)
		}
	}
	var worst time.Duration
	for i, d := range g.retried {
		worst = max(worst, d)
		g.t.Logf("allocation retried for %s: %s", d.Round(time.Millisecond), g.retryWhy[i])
	}
	g.t.Logf("games: %d played, %d ended cleanly; %d failed allocations, %d failed joins, %d interrupted; %d allocations needed a retry (longest took %s)",
		g.started, g.ended, len(g.allocFailed), len(g.joinFailed), len(g.interrupted), len(g.retried), worst.Round(time.Millisecond))
}
