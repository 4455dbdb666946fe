package relay

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// Reachability: a relay takes no room until players can reach it. On Fly a
// new machine gets no player until its checks pass (the proxy routes to
// it, and the app's UDP, only then), while it registers with the balancer
// at once, directly over the private network. So a relay with a
// ReachableURL (the app's public URL) reports itself unreachable in its
// heartbeats, which keeps the balancer from placing rooms on it, until a
// GET {ReachableURL}/ping with fly-prefer-instance-id naming its machine
// is answered by its own boot: the proxy then balances onto it. From
// then on it is reachable for the rest of the process; a relay without a
// ReachableURL is reachable from the start.

// reachProbeEvery spaces the probes; reachProbeTimeout bounds one.
const (
	reachProbeEvery   = 250 * time.Millisecond
	reachProbeTimeout = 2 * time.Second
)

// reachability is whether players reach this boot. url is static (set by
// New); reached is written by probeReachable.
type reachability struct {
	url     string
	reached atomic.Bool
}

// ok reports whether players reach the relay.
func (r *reachability) ok() bool { return r.url == "" || r.reached.Load() }

// registrationState adds the relay's retiring and reachability to a
// heartbeat.
func (s *Server) registrationState(req *wire.RegisterRequest) {
	req.Retiring = s.core.Retiring()
	req.RetireBy = s.retire.deadline()
	req.Unreachable = !req.Retiring && !s.reach.ok()
}

// probeReachable probes through the public URL until the proxy sends the
// probe to this machine, then says so in a heartbeat at once.
func (s *Server) probeReachable(ctx context.Context) {
	hc := &http.Client{Timeout: reachProbeTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: 5 * time.Second}}
	defer hc.CloseIdleConnections()
	start := s.clock.Now()
	for ctx.Err() == nil {
		if s.reachedThrough(ctx, hc) {
			s.reach.reached.Store(true)
			s.log.Info("players reach this relay through its public address: it takes rooms",
				"after", s.clock.Now().Sub(start).Round(time.Millisecond))
			if s.reg != nil {
				s.reg.beatNow()
			}
			return
		}
		if clock.Sleep(ctx, s.clock, reachProbeEvery) != nil {
			return
		}
	}
}

// reachedThrough is one probe: whether the public URL's /ping, preferring
// this machine, is answered by this boot.
func (s *Server) reachedThrough(ctx context.Context, hc *http.Client) bool {
	var p wire.Ping
	err := wire.Call{Method: http.MethodGet, URL: s.reach.url + "/ping", Header: func(h http.Header) {
		if s.opts.MachineID != "" {
			h.Set(wire.HeaderFlyPreferInstance, s.opts.MachineID)
		}
	}}.DoJSON(ctx, hc, &p)
	return err == nil && p.BootID == s.opts.BootID
}
