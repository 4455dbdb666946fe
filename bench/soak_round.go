package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// Kinds of soak connections.
const (
	kindHost      = "host"            // a room's host: reads, answers each player
	kindPlayer    = "player"          // joins, one message to its host and one back, then dropped
	kindDeaf      = "never_reading"   // authenticates, never reads while its host sends to it; dropped
	kindUnauthed  = "unauthenticated" // WebSocket upgraded, nothing sent: closed by the auth timeout
	kindSilent    = "silent"          // TCP connected to the HTTP port, nothing sent: the header timeout
	kindSlowloris = "slowloris"       // half a request on the WebSocket port, never finished: the header timeout
)

// Shape of a round.
const (
	// soakSources is how many loopback source addresses (127.0.2.x) a
	// round's connections come from: at most about 40 of a 10,000-round's
	// connections wait to authenticate per source, under the relay's 64.
	soakSources = 200
	// soakClientsPerHost is the clients (players and deaf ones) per room.
	soakClientsPerHost = 12
	// deafBurst messages of deafSize bytes go from a host to each of its
	// clients as it connects: a deaf one never reads them.
	deafBurst = 8
	deafSize  = 1024
)

var (
	pingMsg = []byte("soak-ping")
	pongMsg = []byte("soak-pong")
)

// round is one soak round's connections and tallies. Its fields are
// guarded by mu; the connection slices are appended by the dialling
// goroutines and read once every dial has returned.
type round struct {
	o        Options
	t        target
	wsURL    string         // the relay's WebSocket port, ws://
	wsAddr   string         // the same, host:port
	httpAddr string         // the relay's HTTP port, host:port
	srcs     []*http.Client // one per source address, no keep-alive
	dialers  []*net.Dialer  // the same sources for raw TCP

	allocMu sync.Mutex // serializes allocate

	mu       sync.Mutex
	rd       SoakRound
	drop     []func() // what the soak abandons at the end of the round
	watchers int      // connections the relay must close, watched
	// close receives one report per watcher (written by the watchers,
	// read by soakRound; buffered for all of them).
	close chan time.Duration
}

// soakRound runs round i: open everything, play, abandon, and wait for
// the relay to close what it must.
func soakRound(ctx context.Context, o Options, t target, wsURL, httpURL string, i int) (SoakRound, error) {
	r := &round{o: o, t: t, wsURL: wsURL, wsAddr: hostPort(wsURL), httpAddr: hostPort(httpURL), close: make(chan time.Duration, o.Soak)}
	r.rd.Opened = map[string]int{}
	r.sources()
	defer r.closeSources()
	n := o.Soak
	hosts := max(1, n/(soakClientsPerHost+1+soakClientsPerHost/2))
	rest := n - hosts
	counts := map[string]int{kindSilent: rest / 8, kindSlowloris: rest / 8, kindUnauthed: rest / 4, kindDeaf: rest / 8}
	counts[kindPlayer] = rest - counts[kindSilent] - counts[kindSlowloris] - counts[kindUnauthed] - counts[kindDeaf]

	ctx, cancel := context.WithTimeout(ctx, o.SetupTimeout+o.SoakTimeout+soakGrace)
	defer cancel()
	rooms, err := r.openHosts(ctx, i, hosts)
	if err != nil {
		r.abandon()
		return r.rd, err
	}
	// The connections the relay must close go first, so they wait for
	// their timeouts while the players play.
	opened := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.DialParallel)
	seq := 0
	for _, k := range []string{kindSilent, kindSlowloris, kindUnauthed, kindDeaf, kindPlayer} {
		for range counts[k] {
			seq++
			src, rm := seq%soakSources, rooms[seq%len(rooms)]
			g.Go(func() error { return r.open(gctx, k, src, rm) })
		}
	}
	err = g.Wait()
	r.abandon()
	r.mu.Lock()
	waitRelay := r.watchers
	r.mu.Unlock()
	if err != nil {
		return r.rd, err
	}
	// Every connection the relay must close reports once: closed (its
	// time) or not closed by its deadline (-1).
	bound := time.Until(opened.Add(o.SoakTimeout + soakGrace + o.SetupTimeout))
	for range waitRelay {
		select {
		case d := <-r.close:
			r.tallyClose(d)
		case <-time.After(max(bound, time.Second)):
			return r.rd, errors.New("the close watchers did not report")
		}
	}
	return r.rd, nil
}

// sources makes the round's HTTP clients and dialers, one per source.
func (r *round) sources() {
	for k := range soakSources {
		d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 2, byte(1+k))}, Control: bindNoPort}
		r.dialers = append(r.dialers, d)
		r.srcs = append(r.srcs, &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}})
	}
}

func (r *round) closeSources() {
	for _, c := range r.srcs {
		c.CloseIdleConnections()
	}
}

// soakRoom is a room of the round: its host and what clients join with.
type soakRoom struct {
	name string
	join wire.Capability
}

// openHosts allocates and joins n rooms and connects their hosts; each
// host answers every player's ping and sends each client a burst.
func (r *round) openHosts(ctx context.Context, round, n int) ([]*soakRoom, error) {
	rooms := make([]*soakRoom, n)
	prefix := randomHex(4)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, r.o.DialParallel/4))
	for i := range rooms {
		g.Go(func() error {
			name := fmt.Sprintf("soak-%s-%d-%d", prefix, round, i)
			hc, jc, err := r.allocate(gctx, name)
			if err != nil {
				return err
			}
			h, err := client.DialHost(gctx, hc, name, &client.DialOptions{HTTPClient: r.srcs[i%soakSources]})
			if err != nil {
				return err
			}
			r.keep(kindHost, func() { _ = h.CloseNow() })
			rooms[i] = &soakRoom{name: name, join: jc}
			go serveHost(ctx, h)
			return nil
		})
	}
	return rooms, g.Wait()
}

// allocate allocates and joins room name, one room at a time: the
// balancer's kept-alive connections to the relay (and the relay's
// publications to it) then number the same in every round, and only a
// leak can grow the relay's level.
func (r *round) allocate(ctx context.Context, name string) (host, join wire.Capability, err error) {
	r.allocMu.Lock()
	defer r.allocMu.Unlock()
	if host, err = r.t.bal.Allocate(ctx, r.t.region, name, client.NewAllocationID()); err != nil {
		return host, join, err
	}
	join, err = r.t.bal.Join(ctx, name)
	return host, join, err
}

// serveHost is a host's loop until its connection ends: a burst to every
// client that connects, a pong to every ping.
func serveHost(ctx context.Context, h *client.Host) {
	buf := make([]byte, 64<<10)
	burst := make([]byte, deafSize)
	var ids []wire.ConnID
	for {
		ev, err := h.NextInto(ctx, buf)
		if err != nil {
			return
		}
		switch ev.Type {
		case wire.ToHostConnected:
			ids = ev.AppendIDs(ids[:0])
			for _, id := range ids {
				for range deafBurst {
					if h.SendOne(ctx, id, burst) != nil {
						return
					}
				}
			}
		case wire.ToHostData:
			if string(ev.Payload) == string(pingMsg) && h.SendOne(ctx, ev.ID, pongMsg) != nil {
				return
			}
		}
	}
}

// keep counts an opened connection of kind and remembers how to drop it.
func (r *round) keep(kind string, drop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rd.Opened[kind]++
	if drop != nil {
		r.drop = append(r.drop, drop)
	}
}

// failed counts a connection that failed: a refused upgrade (the
// relay's bounds) or an error.
func (r *round) failed(kind string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.Contains(err.Error(), fmt.Sprintf("HTTP %d", http.StatusServiceUnavailable)) {
		r.rd.Refused++
		return
	}
	r.rd.Errors++
	if r.rd.FirstError == "" {
		r.rd.FirstError = kind + ": " + err.Error()
	}
}

func (r *round) tallyClose(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d < 0 {
		r.rd.NotClosed++
		return
	}
	r.rd.ClosedByRelay++
	r.rd.MaxCloseSec = max(r.rd.MaxCloseSec, round3(d.Seconds()))
}

// abandon drops every connection the soak holds, without a word.
func (r *round) abandon() {
	r.mu.Lock()
	drop := r.drop
	r.drop = nil
	r.mu.Unlock()
	// Clients first, hosts last (they were kept first): a room whose
	// host leaves it empty ends at once.
	for i := len(drop) - 1; i >= 0; i-- {
		drop[i]()
	}
}

// hostPort is the host:port of a ws:// or http:// URL.
func hostPort(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	hp, _, _ := strings.Cut(rest, "/")
	return hp
}
