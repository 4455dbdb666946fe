package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/randid"
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
	udpEcho  netip.AddrPort   // UDP baseline: the echo server's address
	// udpPort is the relay child's LiteNetLib port (0 = unknown): every
	// allocation and join of a UDP run must carry it as udpPortV2.
	udpPort int
	udp1    bool   // udpPort is the LiteNetLib 1.x port: the capability's udpPort
	metrics string // the relay child's /metrics URL (UDP: datagram counters; WebSocket: direct writes and batches)

	// Forwarding mode: hosts dial hostURL and clients clientURL, both
	// without a session hint, as PurrNet's own client does; every room
	// must be placed on the relay whose public port is holderPort.
	hostURL, clientURL string
	holderPort         int
	edgeMetrics        string // the edge relay's /metrics URL
}

// echo reports whether t is a baseline echo server (WebSocket or UDP).
func (t target) echo() bool { return t.echoURL != "" || t.udpEcho.IsValid() }

// conn is one load connection: a Host (relay rooms' hosts), a Client
// (relay clients, and every WebSocket baseline connection) or a plain UDP
// socket (every UDP baseline connection).
type conn struct {
	host *client.Host
	cl   *client.Client
	udp  *net.UDPConn
}

func (c conn) closeNow() {
	if c.host != nil {
		_ = c.host.CloseNow()
	}
	if c.cl != nil {
		_ = c.cl.CloseNow()
	}
	if c.udp != nil {
		_ = c.udp.Close()
	}
}

// close leaves gracefully (over UDP: a Disconnect the relay acknowledges,
// bounded by the client).
func (c conn) close() {
	if c.host != nil {
		_ = c.host.Close()
	}
	if c.cl != nil {
		_ = c.cl.Close()
	}
	if c.udp != nil {
		_ = c.udp.Close()
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
	par := o.DialParallel
	if o.Transport.UDP() {
		par = min(par, udpDialParallel)
	}
	g.SetLimit(max(1, par/(min(o.Clients, 8)+1)))
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
	if t.udpEcho.IsValid() {
		return connectUDPEchoRoom(t.udpEcho, clients)
	}
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
	if err := t.checkUDPPort(hostCap, name); err != nil {
		return r, err
	}
	h, err := client.DialHost(ctx, hostCap, name, dialOptions(o, d, t.hostURL))
	if err != nil {
		return r, err
	}
	r.host = conn{host: h}
	if clients == 0 {
		return r, nil
	}
	joinCap, err := t.joinRoom(ctx, name)
	if err != nil {
		return r, err
	}
	for range clients {
		c, err := client.DialClient(ctx, joinCap, name, dialOptions(o, d, t.clientURL))
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

// joinRoom joins room name through the balancer.
func (t target) joinRoom(ctx context.Context, name string) (wire.Capability, error) {
	c, err := t.bal.Join(ctx, name)
	if err != nil {
		return c, err
	}
	return c, t.checkUDPPort(c, name)
}

// udpDialParallel bounds a UDP run's dials in flight: every load socket
// has source address 127.0.0.1 and litenet holds at most
// DefaultMaxPendingPerIP (64) unauthenticated connections per address.
const udpDialParallel = 32

// dialOptions are the options of a relay connection: over WebSocket from
// the dialer's next source address, to url when set (the forwarding
// mode's, without the session hint, as PurrNet connects); over UDP to the
// capability's host at its udpPortV2.
func dialOptions(o Options, d *dialer, url string) *client.DialOptions {
	if o.Transport.UDP() {
		return &client.DialOptions{Transport: o.Transport, UDPFlush: max(o.PeerFlush, 0), UDPArrivals: true}
	}
	return &client.DialOptions{HTTPClient: d.next(), URL: url, NoSessionHint: url != ""}
}

// checkUDPPort fails a UDP run whose capability does not name the relay
// child's LiteNetLib port (t.udpPort, set for UDP runs only).
func (t target) checkUDPPort(c wire.Capability, room string) error {
	got, field := c.UDPPortV2, "udpPortV2"
	if t.udp1 {
		got, field = c.UDPPort, "udpPort"
	}
	if t.udpPort == 0 || got == t.udpPort {
		return nil
	}
	return fmt.Errorf("room %s came with %s %d, not the relay child's UDP port %d", room, field, got, t.udpPort)
}

// udpCloseParallel bounds the graceful closes at the end of a UDP run.
const udpCloseParallel = 256

// endRooms closes every connection at the end of a run. Over WebSocket
// dropping them is enough: the relay sees each TCP connection end. A
// LiteNetLib peer dropped without a word would stay on the relay until
// its timeout (relay.DefaultUDPTimeout), pinged and holding memory into
// the next run, so UDP connections leave gracefully, udpCloseParallel at
// once, each bounded by the client's own wait.
func endRooms(rooms []*room, o Options) {
	if !o.Transport.UDP() {
		closeRooms(rooms)
		return
	}
	var g errgroup.Group
	g.SetLimit(udpCloseParallel)
	for _, r := range rooms {
		if r == nil {
			continue
		}
		g.Go(func() error { r.host.close(); return nil })
		for _, c := range r.clients {
			g.Go(func() error { c.close(); return nil })
		}
	}
	_ = g.Wait()
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

func randomHex(n int) string { return randid.Hex(n) }
