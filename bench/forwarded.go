package bench

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/purrfly/purrfly/client"
)

// The forwarding mode's two relays are machines of one app. Placement is
// region first, so the holder alone is in benchRegion (where rooms are
// allocated) and the edge in edgeRegion: every room lands on the holder,
// whatever the load. The public endpoint is only advertised (/servers
// lists the app under it), never dialled.
const (
	edgeRegion          = "bench-edge"
	forwardedPublicHTTP = "http://purrfly-bench.invalid"
)

// startForwarded starts the in-process balancer and two relay children in
// multi-machine mode: the holder (rooms are placed on it) and the edge
// (which forwards hintless clients to the holder). The forwarded target
// connects hosts to the holder and clients to the edge; the direct target
// (with Baseline) connects both to the holder. Both measure both relays.
func (s *servers) startForwarded(ctx context.Context, o Options) error {
	if err := s.startBalancer(o); err != nil {
		return err
	}
	bc := client.NewBalancer(s.bal.URL())
	cfg := ServerConfig{
		Kind: KindRelay, Secret: o.Secret, BalancerURL: s.bal.URL(), Region: benchRegion,
		MultiMachine: true, PublicEndpoint: forwardedPublicHTTP,
	}
	var err error
	if s.relayCh, err = startChild(ctx, o, cfg); err != nil {
		return err
	}
	if err := waitRegistered(ctx, bc, o.Secret, s.relayCh, 1); err != nil {
		return err
	}
	cfg.Region = edgeRegion
	if s.edgeCh, err = startChild(ctx, o, cfg); err != nil {
		return err
	}
	if err := waitRegistered(ctx, bc, o.Secret, s.edgeCh, 2); err != nil {
		return err
	}
	port, err := wsPort(s.relayCh.url)
	if err != nil {
		return err
	}
	o.Logger.Info("relay children ready", "holder", s.relayCh.pid, "holderWS", s.relayCh.url,
		"edge", s.edgeCh.pid, "edgeWS", s.edgeCh.url)
	both := []*child{s.relayCh, s.edgeCh}
	s.relay = target{
		name: "forwarded", pid: s.relayCh.pid, edgePID: s.edgeCh.pid, children: both,
		bal: bc, region: benchRegion, holderPort: port,
		hostURL: s.relayCh.url, clientURL: s.edgeCh.url, edgeMetrics: s.edgeMetricsURL(),
	}
	if o.Baseline {
		s.base = s.relay
		s.base.name, s.base.baseline, s.base.clientURL = "direct", true, s.relayCh.url
	}
	return nil
}

// wsPort is the port of a child's ws:// URL.
func wsPort(raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("failed to parse the relay child's URL %q: %w", raw, err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0, fmt.Errorf("failed to parse the relay child's URL %q: no port", raw)
	}
	return p, nil
}

// edgeMetricsURL is the edge relay's /metrics (for tests and diagnosis).
func (s *servers) edgeMetricsURL() string {
	if s.edgeCh == nil || s.edgeCh.http == "" {
		return ""
	}
	return s.edgeCh.http + "/metrics"
}
