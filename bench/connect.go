package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// target is the server one side of the run talks to.
type target struct {
	name     string           // "relay", "baseline", "forwarded" or "direct"
	baseline bool             // its Side is Result.Baseline
	pid      int              // process to measure; 0 = none
	edgePID  int              // forwarding mode: the edge relay, measured too (0 = none)
	children []*child         // checked to be alive after the run
	bal      *client.Balancer // relay: where rooms are allocated and joined
	region   string           // relay: allocation region
	echoURL  string           // baseline: the echo server's ws:// URL

	// Forwarding mode: hosts dial hostURL and clients clientURL, both
	// without a session hint, as PurrNet's own client does; every room
	// must be placed on the relay whose public port is holderPort.
	hostURL, clientURL string
	holderPort         int
	edgeMetrics        string // the edge relay's /metrics URL
}

// conn is one load connection: a Host (relay rooms' hosts) or a Client
// (relay clients, and every baseline connection).
type conn struct {
	host *client.Host
	cl   *client.Client
}

func (c conn) closeNow() {
	if c.host != nil {
		_ = c.host.CloseNow()
	}
	if c.cl != nil {
		_ = c.cl.CloseNow()
	}
}

// room is one room of the load. ids are the relay's ids of the clients, as
// the host saw them connect (the baseline has no ids: dummies).
type room struct {
	host    conn
	clients []conn
	ids     []wire.ConnID
}

// dialer hands out HTTP clients bound to loopback source addresses,
// 127.0.0.1 for the first sourceIPSpan connections, 127.0.0.2 for the next
// and so on, so that large idle runs do not run out of ephemeral ports.
type dialer struct {
	n       atomic.Int64
	mu      sync.Mutex
	clients map[int]*http.Client // guarded by mu
}

func (d *dialer) next() *http.Client {
	k := int(d.n.Add(1)-1) / sourceIPSpan
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.clients == nil {
		d.clients = map[int]*http.Client{}
	}
	if c, ok := d.clients[k]; ok {
		return c
	}
	nd := &net.Dialer{Timeout: 10 * time.Second}
	if k > 0 {
		// Only past the first span: binding a source address makes the
		// kernel pick the port at bind time, blind to the destination,
		// unless IP_BIND_ADDRESS_NO_PORT is set (bindNoPort).
		nd.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, byte(k/254), byte(1+k%254))}
		nd.Control = bindNoPort
	}
	c := &http.Client{Transport: &http.Transport{DialContext: nd.DialContext, DisableKeepAlives: true}}
	d.clients[k] = c
	return c
}

func (d *dialer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.clients {
		c.CloseIdleConnections()
	}
}

// connect opens every room of the run: allocate (relay), host, join,
// clients, then waits until the host saw each client connect. On error
// it closes what it opened.
func connect(ctx context.Context, o Options, t target) ([]*room, error) {
	ctx, cancel := context.WithTimeout(ctx, o.SetupTimeout)
	defer cancel()
	var d dialer
	defer d.close()
	prefix := randomHex(4)
	rooms := make([]*room, o.Rooms)
	g, gctx := errgroup.WithContext(ctx)
	// Dials run DialParallel at once: rooms in parallel, a room's
	// connections one after another.
	g.SetLimit(max(1, o.DialParallel/(min(o.Clients, 8)+1)))
	for i := range rooms {
		g.Go(func() error {
			r, err := connectRoom(gctx, o, t, &d, fmt.Sprintf("bench-%s-%d", prefix, i), o.clientsIn(i))
			rooms[i] = r
			return err
		})
	}
	if err := g.Wait(); err != nil {
		closeRooms(rooms)
		return nil, err
	}
	return rooms, nil
}

func connectRoom(ctx context.Context, o Options, t target, d *dialer, name string, clients int) (*room, error) {
	r := &room{}
	if t.echoURL != "" {
		capab := wire.Capability{Secret: "bench"}
		h, err := client.DialClient(ctx, capab, name, &client.DialOptions{URL: t.echoURL, HTTPClient: d.next()})
		if err != nil {
			return r, fmt.Errorf("failed to connect to the echo server: %w", err)
		}
		r.host = conn{cl: h}
		for i := range clients {
			c, err := client.DialClient(ctx, capab, name, &client.DialOptions{URL: t.echoURL, HTTPClient: d.next()})
			if err != nil {
				return r, fmt.Errorf("failed to connect to the echo server: %w", err)
			}
			r.clients = append(r.clients, conn{cl: c})
			r.ids = append(r.ids, wire.ConnID(i+1))
		}
		return r, nil
	}
	hostCap, err := t.bal.Allocate(ctx, t.region, name, client.NewAllocationID())
	if err != nil {
		return r, err
	}
	if t.holderPort != 0 && hostCap.Port != t.holderPort {
		return r, fmt.Errorf("room %s was placed on port %d, not on the holder relay (port %d)", name, hostCap.Port, t.holderPort)
	}
	h, err := client.DialHost(ctx, hostCap, name, &client.DialOptions{HTTPClient: d.next(), URL: t.hostURL, NoSessionHint: t.hostURL != ""})
	if err != nil {
		return r, err
	}
	r.host = conn{host: h}
	if clients == 0 {
		return r, nil
	}
	joinCap, err := t.bal.Join(ctx, name)
	if err != nil {
		return r, err
	}
	for range clients {
		c, err := client.DialClient(ctx, joinCap, name, &client.DialOptions{HTTPClient: d.next(), URL: t.clientURL, NoSessionHint: t.clientURL != ""})
		if err != nil {
			return r, err
		}
		r.clients = append(r.clients, conn{cl: c})
	}
	// The host learns each client's id from [0][id...] notices.
	buf := make([]byte, 1+4*clients+64)
	for len(r.ids) < clients {
		ev, err := h.NextInto(ctx, buf)
		if err != nil {
			return r, fmt.Errorf("failed to see the clients of %s connect: %w", name, err)
		}
		if ev.Type == wire.ToHostConnected {
			r.ids = ev.AppendIDs(r.ids)
		}
	}
	return r, nil
}

func closeRooms(rooms []*room) {
	for _, r := range rooms {
		if r == nil {
			continue
		}
		r.host.closeNow()
		for _, c := range r.clients {
			c.closeNow()
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
