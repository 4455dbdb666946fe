package bench

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/clock"
)

// The connection soak: a relay child at its production bounds
// on connections waiting to authenticate (4,096 in all, 64 per source)
// and with authentication and header timeouts of SoakTimeout (its empty
// rooms, vacant for host migration, expire as soon), and an
// in-process balancer. Each round opens Soak connections from
// soakSources loopback source addresses, in the mix a public relay meets
// (soakround.go): silent TCP connections, slowloris requests, upgrades
// that never authenticate, authenticated clients that never read, and
// clients that play and are abandoned (closed without a word). Those the
// relay must close are left to it, and each must be closed within
// SoakTimeout plus soakGrace; the rest are dropped. After each round the
// relay's goroutines and open files (its /metrics) must come back to the
// level the first round settled at: "growth" is what they stay above it.

// Defaults and bounds of the connection soak.
const (
	DefaultRounds      = 3
	DefaultSoakTimeout = 10 * time.Second // relay.DefaultAuthTimeout and wire.DefaultHeaderTimeout
	MaxSoakConnections = 50_000
	// soakGrace is how late past SoakTimeout the relay may close a
	// connection it must close (scheduling on a loaded machine) before
	// the soak counts it as not closed.
	soakGrace = 5 * time.Second
	// soakSettle bounds how long the relay's gauges may take to come
	// back down after a round, past SoakTimeout.
	soakSettle = 15 * time.Second
	// soakPoll is how often the gauges are read while settling.
	soakPoll = 100 * time.Millisecond
)

// runSoak runs the connection soak: Rounds rounds against one relay.
func runSoak(ctx context.Context, o Options) (*Result, error) {
	s := &servers{}
	defer func() { s.close() }()
	if err := s.startBalancer(o); err != nil {
		return nil, err
	}
	ch, err := startChild(ctx, o, ServerConfig{Kind: KindRelay, Secret: o.Secret, BalancerURL: s.bal.URL(),
		Region: benchRegion, SoakTimeoutMS: int(o.SoakTimeout / time.Millisecond)})
	if err != nil {
		return nil, err
	}
	s.relayCh = ch
	bc := client.NewBalancer(s.bal.URL())
	if err := waitRegistered(ctx, bc, o.Secret, ch, 1); err != nil {
		return nil, err
	}
	g := &gauges{url: ch.http + "/metrics", hc: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	before, err := g.read(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{Shape: Shape{Kind: "soak", Transport: "ws", Connections: o.Soak, CPUs: runtime.NumCPU(), Balancer: "in-process", Repeat: 1}}
	sr := &SoakResult{Rounds: o.Rounds, TimeoutSec: o.SoakTimeout.Seconds(),
		Before: Level{Goroutines: int(before.goroutines), FDs: int(before.fds)}}
	res.Soak = sr
	t := target{name: "relay", pid: ch.pid, bal: bc, region: benchRegion}
	start := time.Now()
	for i := range o.Rounds {
		rd, err := soakRound(ctx, o, t, ch.url, ch.http, i)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", i+1, err)
		}
		lvl, wait, err := g.settle(ctx, sr.Settled, i == 0, o.SoakTimeout+soakSettle)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", i+1, err)
		}
		rd.Settled, rd.SettleSec = lvl, round3(wait.Seconds())
		if i == 0 {
			sr.Settled = lvl
		} else {
			rd.GoroutineGrowth = max(0, lvl.Goroutines-sr.Settled.Goroutines)
			rd.FDGrowth = max(0, lvl.FDs-sr.Settled.FDs)
		}
		sr.Round = append(sr.Round, rd)
		o.Logger.Info("soak round done", "round", i+1, "goroutines", lvl.Goroutines, "fds", lvl.FDs, "settle", wait)
		if e := ch.exited(); e != nil {
			return res, fmt.Errorf("relay: %w", e)
		}
	}
	sr.Seconds = round3(time.Since(start).Seconds())
	sr.total()
	return res, nil
}

// gauges reads the soak's relay gauges; every read is a new connection
// (no keep-alive), so the reads themselves leave nothing on the relay.
type gauges struct {
	url string
	hc  *http.Client
}

func (g *gauges) read(ctx context.Context) (relayCounters, error) {
	return scrapeRelay(ctx, g.hc, g.url)
}

// settle waits until the relay holds no connection and no room and its
// goroutines and open files are back to ref (with first, the first round,
// which has no reference: until two reads in a row agree), or until bound
// passes; it returns the level then (the lowest seen once connections and
// rooms are gone, when bound passes).
func (g *gauges) settle(ctx context.Context, ref Level, first bool, bound time.Duration) (Level, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var low, prev *Level
	var last relayCounters
	for {
		c, err := g.read(ctx)
		if err == nil {
			last = c
		}
		if err != nil && ctx.Err() == nil {
			return Level{}, 0, err
		}
		if err == nil && c.conns == 0 && c.rooms == 0 {
			lvl := Level{Goroutines: int(c.goroutines), FDs: int(c.fds)}
			if low == nil || lvl.Goroutines+lvl.FDs < low.Goroutines+low.FDs {
				low = &lvl
			}
			if (first && prev != nil && *prev == lvl) || (!first && lvl.Goroutines <= ref.Goroutines && lvl.FDs <= ref.FDs) {
				return lvl, time.Since(start), nil
			}
			prev = &lvl
		}
		if err := clock.Sleep(ctx, nil, soakPoll); err != nil {
			if low == nil {
				return Level{}, time.Since(start), fmt.Errorf("the relay still holds %.0f connections and %.0f rooms %s after the round", last.conns, last.rooms, bound)
			}
			return *low, time.Since(start), nil
		}
	}
}
