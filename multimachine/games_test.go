package multimachine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// stepTimeout bounds one game's connect or exchange.
const stepTimeout = 15 * time.Second

// game is one room with its host and clients, all connected without the
// session hint, as PurrNet connects.
type game struct {
	name    string
	holder  string // machine id holding the room
	hostCap wire.Capability
	joinCap wire.Capability

	host    *client.Host
	clients []*client.Client
	ids     []wire.ConnID // ids[i] is clients[i]'s id, as the host heard it
}

// allocate creates a room through the balancer and learns its holder.
func (f *fleet) allocate(name string) *game {
	f.t.Helper()
	ctx := f.ctx(stepTimeout)
	hc, err := f.api.Allocate(ctx, region, name, client.NewAllocationID())
	if err != nil {
		f.t.Fatalf("allocate %s: %v", name, err)
	}
	jc, err := f.api.Join(ctx, name)
	if err != nil {
		f.t.Fatalf("join %s: %v", name, err)
	}
	g := &game{name: name, hostCap: hc, joinCap: jc, holder: f.locate(name)}
	if g.holder == "" {
		f.t.Fatalf("the balancer does not locate room %s it just allocated", name)
	}
	return g
}

// dialOpts connects without the hint, through the app's proxy, to a
// random machine, or to machine via fly-force-instance-id (still no hint).
func (f *fleet) dialOpts(machine string) *client.DialOptions {
	o := &client.DialOptions{NoSessionHint: true, HTTPClient: f.hc}
	if machine != "" {
		o.HTTPHeader = http.Header{wire.HeaderFlyForceInstance: {machine}}
	}
	return o
}

// hintedOpts connects with the Go client's ?s= hint, through machine.
func (f *fleet) hintedOpts(machine string) *client.DialOptions {
	return &client.DialOptions{HTTPClient: f.hc, HTTPHeader: http.Header{wire.HeaderFlyForceInstance: {machine}}}
}

// connectHost connects the room's host (edge "" = random).
func (f *fleet) connectHost(ctx context.Context, g *game, edge string) error {
	h, err := client.DialHost(ctx, g.hostCap, g.name, f.dialOpts(edge))
	if err != nil {
		return fmt.Errorf("room %s: %w", g.name, err)
	}
	g.host = h
	return nil
}

// addClient connects one more client (edge "" = random) and checks that
// the host hears of it with a new id.
func (f *fleet) addClient(ctx context.Context, g *game, edge string) error {
	return f.addClientWith(ctx, g, f.dialOpts(edge))
}

// addClientWith connects one more client with opts (see addClient).
func (f *fleet) addClientWith(ctx context.Context, g *game, opts *client.DialOptions) error {
	c, err := client.DialClient(ctx, g.joinCap, g.name, opts)
	if err != nil {
		return fmt.Errorf("room %s: client: %w", g.name, err)
	}
	p, err := g.host.Next(ctx)
	if err != nil {
		c.CloseNow()
		return fmt.Errorf("room %s: waiting for the connect notice: %w", g.name, err)
	}
	if p.Type != wire.ToHostConnected || len(p.IDs) != 1 || slices.Contains(g.ids, p.IDs[0]) {
		c.CloseNow()
		return fmt.Errorf("room %s: host got %+v, want a connect notice with one new id", g.name, p)
	}
	g.clients = append(g.clients, c)
	g.ids = append(g.ids, p.IDs[0])
	return nil
}

// exchange sends one payload from every client to the host (which must
// see each under the id it was told) and one reply from the host to every
// client.
func (g *game) exchange(ctx context.Context, round int) error {
	want := map[wire.ConnID][]byte{}
	for i, c := range g.clients {
		p := fmt.Appendf(nil, "%s/c%d/r%d", g.name, i, round)
		want[g.ids[i]] = p
		if err := c.Send(ctx, p); err != nil {
			return fmt.Errorf("room %s: client %d send: %w", g.name, i, err)
		}
	}
	for range g.clients {
		p, err := g.host.Next(ctx)
		if err != nil {
			return fmt.Errorf("room %s: host read: %w", g.name, err)
		}
		if p.Type != wire.ToHostData || len(p.IDs) != 1 || !bytes.Equal(want[p.IDs[0]], p.Payload) {
			return fmt.Errorf("room %s: host got %+v (%q), want data from one of %v", g.name, p, p.Payload, g.ids)
		}
		delete(want, p.IDs[0])
	}
	for i, c := range g.clients {
		reply := fmt.Appendf(nil, "%s/h->%d/r%d", g.name, g.ids[i], round)
		if err := g.host.SendOne(ctx, g.ids[i], reply); err != nil {
			return fmt.Errorf("room %s: host send: %w", g.name, err)
		}
		got, err := c.Recv(ctx)
		if err != nil {
			return fmt.Errorf("room %s: client %d read: %w", g.name, i, err)
		}
		if !bytes.Equal(got, reply) {
			return fmt.Errorf("room %s: client %d got %q, want %q", g.name, i, got, reply)
		}
	}
	return nil
}

// expectLeft reads the host's next packet, which must be client id's
// disconnect notice, and forgets that client.
func (g *game) expectLeft(ctx context.Context, id wire.ConnID) error {
	p, err := g.host.Next(ctx)
	if err != nil {
		return fmt.Errorf("room %s: waiting for a disconnect notice: %w", g.name, err)
	}
	if p.Type != wire.ToHostDisconnected || len(p.IDs) != 1 || p.IDs[0] != id {
		return fmt.Errorf("room %s: host got %+v, want client %d's disconnect notice", g.name, p, id)
	}
	i := slices.Index(g.ids, id)
	g.ids = slices.Delete(g.ids, i, i+1)
	g.clients = slices.Delete(g.clients, i, i+1)
	return nil
}

// closeNow drops every connection of the game (test cleanup).
func (g *game) closeNow() {
	if g.host != nil {
		g.host.CloseNow()
	}
	for _, c := range g.clients {
		c.CloseNow()
	}
}

// each runs fn for every game, eight at a time, each bounded by
// stepTimeout, and returns the first error.
func each(ctx context.Context, games []*game, fn func(ctx context.Context, g *game) error) error {
	var eg errgroup.Group
	eg.SetLimit(8)
	for _, g := range games {
		eg.Go(func() error {
			ctx, cancel := context.WithTimeout(ctx, stepTimeout)
			defer cancel()
			return fn(ctx, g)
		})
	}
	return eg.Wait()
}

// expectLeftAny reads the host's next packets, which must be the
// disconnect notices of exactly ids (in any order), and forgets those
// clients.
func (g *game) expectLeftAny(ctx context.Context, ids ...wire.ConnID) error {
	left := slices.Clone(ids)
	for len(left) > 0 {
		p, err := g.host.Next(ctx)
		if err != nil {
			return fmt.Errorf("room %s: waiting for disconnect notices of %v: %w", g.name, left, err)
		}
		if p.Type != wire.ToHostDisconnected || len(p.IDs) != 1 || !slices.Contains(left, p.IDs[0]) {
			return fmt.Errorf("room %s: host got %+v, want a disconnect notice of one of %v", g.name, p, left)
		}
		left = slices.DeleteFunc(left, func(id wire.ConnID) bool { return id == p.IDs[0] })
		i := slices.Index(g.ids, p.IDs[0])
		g.ids = slices.Delete(g.ids, i, i+1)
		g.clients = slices.Delete(g.clients, i, i+1)
	}
	return nil
}

// closedWithin calls next (one read of a connection) until the
// connection ends and returns the close status (-1 for a dropped
// connection) and when it ended.
func closedWithin(ctx context.Context, next func(context.Context) error) (int, time.Time, error) {
	for {
		err := next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return 0, time.Time{}, errors.New("still open")
			}
			return client.CloseStatus(err), time.Now(), nil
		}
	}
}
