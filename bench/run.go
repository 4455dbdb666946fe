package bench

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/limit"
)

// benchRegion is the region of the relay child.
const benchRegion = "bench"

// Run runs the load described by o against the relay and, with Baseline,
// against the echo server, one after the other (never at once, so they do
// not share the CPU), Repeat times, alternating which goes first, and
// reports the medians.
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.BalancerLoad > 0 {
		return runBalancerLoad(ctx, o)
	}
	if o.Soak > 0 {
		return runSoak(ctx, o)
	}
	// Each connection is a file descriptor in this process and in the
	// server: fail now rather than after minutes of dialling.
	if lim := fdLimit(); lim > 0 && uint64(o.connections())+256 > lim {
		return nil, fmt.Errorf("%w: %d connections need more than the open-file limit of %d (ulimit -n)", ErrInvalidOptions, o.connections(), lim)
	}
	srv, err := startServers(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { srv.close() }()
	res := &Result{Shape: newShape(o)}
	var relays, baselines []*Side
	measured := 0
	for rep := range o.Repeat {
		order := []bool{false, true} // baseline side?
		if rep%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		var pair Result
		for _, base := range order {
			t := srv.pick(base)
			if t.name == "" {
				continue
			}
			// The forwarding mode's two sides share the relay processes:
			// each run gets fresh ones, so that neither inherits the
			// other's rooms, heap or memory figures.
			if o.Forwarded && measured > 0 {
				srv.close()
				if srv, err = startServers(ctx, o); err != nil {
					srv = &servers{}
					return nil, err
				}
				t = srv.pick(base)
			}
			measured++
			side, err := measure(ctx, o, t)
			if err != nil {
				return nil, fmt.Errorf("%s run: %w", t.name, err)
			}
			if t.baseline {
				pair.Baseline = side
				baselines = append(baselines, side)
			} else {
				pair.Relay = side
				relays = append(relays, side)
			}
		}
		pair.computeRatios()
		if o.Repeat > 1 {
			res.Runs = append(res.Runs, Run1{Relay: pair.Relay, Baseline: pair.Baseline,
				RatioMsgs: pair.RatioMsgs, RatioCPU: pair.RatioCPU})
		}
	}
	res.Relay, res.Baseline = medianSide(relays), medianSide(baselines)
	res.computeRatios()
	res.Pooled, res.PooledMissing = pool(relays, baselines)
	return res, nil
}

// servers are the processes under test, alive for the whole Run (the
// forwarding mode starts a fresh set for each run after the first). relay
// goes into Result.Relay and base into Result.Baseline (the echo server,
// or the direct run of the forwarding mode). A target with an empty name
// is not run.
type servers struct {
	bal                     *balancer.Server // in-process balancer, nil with an external one
	relayCh, edgeCh, echoCh *child           // edgeCh: the forwarding mode's second relay
	relay, base             target
}

// pick returns the target of the baseline side, or of the relay side.
func (s *servers) pick(baseline bool) target {
	if baseline {
		return s.base
	}
	return s.relay
}

// startServers starts the relay (a child registered with an in-process
// balancer, unless o names an external balancer) and the echo child, or
// the forwarding mode's two relays (startForwarded).
func startServers(ctx context.Context, o Options) (_ *servers, err error) {
	s := &servers{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	switch {
	case o.Forwarded:
		return s, s.startForwarded(ctx, o)
	case o.SkipRelay:
	case o.BalancerURL != "":
		s.relay = target{name: "relay", pid: o.ServerPID, bal: client.NewBalancer(o.BalancerURL), region: o.Region}
	default:
		if err := s.startBalancer(o); err != nil {
			return nil, err
		}
		s.relayCh, err = startChild(ctx, o, ServerConfig{Kind: KindRelay, Secret: o.Secret, BalancerURL: s.bal.URL(), Region: benchRegion,
			UDPFlushMS: int(o.RelayFlush / time.Millisecond), CPUProfile: o.profile(KindRelay)})
		if err != nil {
			return nil, err
		}
		bc := client.NewBalancer(s.bal.URL())
		if err := waitRegistered(ctx, bc, o.Secret, s.relayCh, 1); err != nil {
			return nil, err
		}
		o.Logger.Info("relay child ready", "pid", s.relayCh.pid, "ws", s.relayCh.url, "udp", s.relayCh.udp)
		s.relay = target{name: "relay", pid: s.relayCh.pid, bal: bc, region: benchRegion, children: []*child{s.relayCh}}
		if o.Transport.UDP() {
			addr := s.relayCh.udp
			if o.Transport == client.TransportUDP1 {
				addr, s.relay.udp1 = s.relayCh.udp1, true
			}
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return nil, fmt.Errorf("failed to read the relay child's UDP address %q: %w", addr, err)
			}
			s.relay.udpPort = int(ap.Port())
		}
		if s.relayCh.http != "" {
			s.relay.metrics = s.relayCh.http + "/metrics"
		}
	}
	if o.Baseline {
		return s, s.startEcho(ctx, o)
	}
	return s, nil
}

// startEcho starts the baseline: the WebSocket echo child, or the UDP
// echo child for a UDP run.
func (s *servers) startEcho(ctx context.Context, o Options) error {
	kind := KindEcho
	if o.Transport.UDP() {
		kind = KindUDPEcho
	}
	var err error
	if s.echoCh, err = startChild(ctx, o, ServerConfig{Kind: kind, CPUProfile: o.profile(kind)}); err != nil {
		return err
	}
	o.Logger.Info("echo child ready", "kind", kind, "pid", s.echoCh.pid, "url", s.echoCh.url)
	s.base = target{name: "baseline", baseline: true, pid: s.echoCh.pid, children: []*child{s.echoCh}}
	if kind == KindEcho {
		s.base.echoURL = s.echoCh.url
		return nil
	}
	s.base.udpEcho, err = udpURLAddr(s.echoCh.url)
	return err
}

// startBalancer starts the in-process balancer.
func (s *servers) startBalancer(o Options) error {
	bal, err := balancer.New(balancer.Options{
		Secret: o.Secret, ListenHost: "127.0.0.1", Region: benchRegion, Version: "bench",
		AllocateRate: unlimited, JoinRate: unlimited, MaxRoomsPerSource: -1, // the load comes from one address
		Logger: o.Logger.With("service", "balancer"),
	})
	if err != nil {
		return fmt.Errorf("failed to configure the balancer: %w", err)
	}
	if err := bal.Start(); err != nil {
		return fmt.Errorf("failed to start the balancer: %w", err)
	}
	s.bal = bal
	return nil
}

// close stops the children, then the balancer.
func (s *servers) close() {
	for _, c := range []*child{s.relayCh, s.edgeCh, s.echoCh} {
		if c != nil {
			c.stop()
		}
	}
	if s.bal != nil {
		_ = s.bal.Close()
	}
}

// waitRegistered polls the balancer until n relays are listed.
func waitRegistered(ctx context.Context, bc *client.Balancer, secret string, ch *child, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if list, err := bc.Instances(ctx, secret); err == nil && len(list) >= n {
			return nil
		}
		if err := ch.exited(); err != nil {
			return fmt.Errorf("relay child: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("failed to see the relay child register: %w", context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// unlimited turns a per-source rate limit off: every load connection
// comes from loopback.
var unlimited = limit.Rate{Every: -1}
