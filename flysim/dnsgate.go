package flysim

import (
	"net"
	"time"
)

// resolvesLocked reports whether the public name of a (<app>.fly.dev on
// Fly) resolves at now, so that clients can reach its proxy at all
// (Platform.DNSDelay): an app the config declares with machines always
// does; one created through the Machines API only once it has a public IP
// and DNSDelay has passed since the first of its current ones.
func (s *Sim) resolvesLocked(a *app, now time.Time) bool {
	delay := s.cfg.Platform.DNSDelay.Duration
	if delay <= 0 || !a.cfg.Reserved {
		return true
	}
	var first time.Time
	for _, ip := range a.ips {
		if ip.kind != IPPrivateV6 && (first.IsZero() || ip.createdAt.Before(first)) {
			first = ip.createdAt
		}
	}
	return !first.IsZero() && !now.Before(first.Add(delay))
}

// dnsGate is a proxy's listener that takes no connection while its app's
// name does not resolve: a client dialling it meets a closed connection,
// where on Fly it would not find the address at all.
type dnsGate struct {
	net.Listener
	s *Sim
	a *app
}

func (g *dnsGate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g.s.mu.Lock()
		ok := g.s.resolvesLocked(g.a, g.s.clk.Now())
		g.s.mu.Unlock()
		if ok {
			return c, nil
		}
		g.s.met.proxyRequests.WithLabelValues(g.a.cfg.Name, "name_not_resolved").Inc()
		_ = c.Close()
	}
}
