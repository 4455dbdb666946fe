package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/client"
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
	// Each connection is a file descriptor in this process and in the
	// server: fail now rather than after minutes of dialling.
	if lim := fdLimit(); lim > 0 && uint64(o.connections())+256 > lim {
		return nil, fmt.Errorf("%w: %d connections need more than the open-file limit of %d (ulimit -n)", ErrInvalidOptions, o.connections(), lim)
	}
	srv, err := startServers(ctx, o)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	res := &Result{Shape: newShape(o)}
	var relays, baselines []*Side
	for rep := range o.Repeat {
		order := []target{srv.relay, srv.echo}
		if rep%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		var pair Result
		for _, t := range order {
			if t.name == "" {
				continue
			}
			side, err := measure(ctx, o, t, srv.child(t))
			if err != nil {
				return nil, fmt.Errorf("%s run: %w", t.name, err)
			}
			if t.echoURL != "" {
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
	return res, nil
}

// servers are the processes under test, alive for the whole Run. A target
// with an empty name is not run.
type servers struct {
	bal             *balancer.Server // in-process balancer, nil with an external one
	relayCh, echoCh *child
	relay, echo     target
}

func (s *servers) child(t target) *child {
	if t.echoURL != "" {
		return s.echoCh
	}
	return s.relayCh
}

// startServers starts the relay (a child registered with an in-process
// balancer, unless o names an external balancer) and the echo child.
func startServers(ctx context.Context, o Options) (_ *servers, err error) {
	s := &servers{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	switch {
	case o.SkipRelay:
	case o.BalancerURL != "":
		s.relay = target{name: "relay", pid: o.ServerPID, bal: client.NewBalancer(o.BalancerURL), region: o.Region}
	default:
		s.bal, err = balancer.New(balancer.Options{
			Secret: o.Secret, ListenHost: "127.0.0.1", Region: benchRegion, Version: "bench",
			Logger: o.Logger.With("service", "balancer"),
		})
		if err != nil {
			return nil, fmt.Errorf("failed to configure the balancer: %w", err)
		}
		if err := s.bal.Start(); err != nil {
			s.bal = nil
			return nil, fmt.Errorf("failed to start the balancer: %w", err)
		}
		s.relayCh, err = startChild(ctx, o, ServerConfig{Kind: KindRelay, Secret: o.Secret, BalancerURL: s.bal.URL(), Region: benchRegion})
		if err != nil {
			return nil, err
		}
		bc := client.NewBalancer(s.bal.URL())
		if err := waitRegistered(ctx, bc, o.Secret, s.relayCh); err != nil {
			return nil, err
		}
		o.Logger.Info("relay child ready", "pid", s.relayCh.pid, "ws", s.relayCh.url)
		s.relay = target{name: "relay", pid: s.relayCh.pid, bal: bc, region: benchRegion}
	}
	if o.Baseline {
		s.echoCh, err = startChild(ctx, o, ServerConfig{Kind: KindEcho})
		if err != nil {
			return nil, err
		}
		o.Logger.Info("echo child ready", "pid", s.echoCh.pid, "ws", s.echoCh.url)
		s.echo = target{name: "baseline", pid: s.echoCh.pid, echoURL: s.echoCh.url}
	}
	return s, nil
}

// close stops the children, then the balancer.
func (s *servers) close() {
	if s.relayCh != nil {
		s.relayCh.stop()
	}
	if s.echoCh != nil {
		s.echoCh.stop()
	}
	if s.bal != nil {
		_ = s.bal.Close()
	}
}

// waitRegistered polls the balancer until the relay child is listed.
func waitRegistered(ctx context.Context, bc *client.Balancer, secret string, ch *child) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if list, err := bc.Instances(ctx, secret); err == nil && len(list) > 0 {
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
