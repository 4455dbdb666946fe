// Package devstack runs a whole purrfly kit in one process on loopback: one
// balancer and one relay per region, wired together. `purrctl dev` is a thin
// shell around it, and end-to-end tests boot the same stack, so what a game
// developer runs locally is what the tests prove.
//
// Every listener binds 127.0.0.1 (or Options.Host); ports are ephemeral
// unless the balancer's is given. Relays register with the balancer before Start returns.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/dashboard"
	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/relay"
)

// DefaultRegions are the regions of the relays `purrctl dev` starts.
var DefaultRegions = []string{"eu", "us"}

// DefaultSecret is the shared secret of a local stack (the original services'
// well-known default; fine on loopback, refused on Fly).
const DefaultSecret = "PURRNET"

// Options configure a Stack. Zero values mean the defaults.
type Options struct {
	BalancerPort int // 0 = ephemeral
	// UDPBasePort is the LiteNetLib port of the first relay, the next
	// relays taking the next ports; 0 = an ephemeral port each. Every relay
	// advertises the port it bound.
	UDPBasePort int
	// UDP1BasePort is the same for LiteNetLib 1.x (older PurrNet builds).
	UDP1BasePort int
	Regions      []string // one relay per entry; default DefaultRegions
	Secret       string   // default DefaultSecret
	// AdminKey is the balancer's /v1 admin key; "" = one generated for
	// the stack (Stack.AdminKey tells it).
	AdminKey string
	// Host is the address every listener binds and every URL advertises
	// (default 127.0.0.1): another of this machine's addresses lets a
	// phone on the LAN play against the stack. Not a wildcard: clients
	// connect to what is advertised.
	Host              string
	HeartbeatInterval time.Duration
	HealthInterval    time.Duration
	EmptyRoomTimeout  time.Duration
	DrainTimeout      time.Duration
	// ActivationLease and GrantLifetime are host migration's
	// (relay.Options); 0 = the relay's defaults.
	ActivationLease time.Duration
	GrantLifetime   time.Duration
	// AllocateRate and JoinRate are the balancer's per-source limits, and
	// MaxRoomsPerSource its cap on one address's live rooms
	// (balancer.Options); zero = its defaults.
	AllocateRate, JoinRate limit.Rate
	MaxRoomsPerSource      int
	Clock                  clock.Clock
	Logger                 *slog.Logger
	// ReadyTimeout bounds how long Start waits for every relay to register.
	ReadyTimeout time.Duration
}

// Stack is a running balancer and its relays.
type Stack struct {
	Balancer *balancer.Server
	Relays   []*relay.Server
	opts     Options
}

// CheckHost reports whether host can be Options.Host: one IP address of
// this machine, not a name or a wildcard (clients connect to what the
// stack advertises).
func CheckHost(host string) error {
	if ip, err := netip.ParseAddr(host); err != nil || ip.IsUnspecified() {
		return fmt.Errorf("must be one IP address of this machine (clients connect to it), not a name or a wildcard, got %q", host)
	}
	return nil
}

// Start boots the balancer, then the relays, and waits until the balancer
// lists every relay.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if len(opts.Regions) == 0 {
		opts.Regions = DefaultRegions
	}
	if opts.Secret == "" {
		opts.Secret = DefaultSecret
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if err := CheckHost(opts.Host); err != nil {
		return nil, fmt.Errorf("host %w", err)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b, err := balancer.New(balancer.Options{
		Secret:            opts.Secret,
		ListenHost:        opts.Host,
		Port:              opts.BalancerPort,
		Region:            "local",
		Version:           "dev",
		HealthInterval:    opts.HealthInterval,
		AllocateRate:      opts.AllocateRate,
		JoinRate:          opts.JoinRate,
		MaxRoomsPerSource: opts.MaxRoomsPerSource,
		Clock:             opts.Clock,
		Logger:            opts.Logger.With("service", "balancer"),
		AdminKeys:         balancer.ParseAdminKeys(opts.AdminKey),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to configure the balancer: %w", err)
	}
	if err := b.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the balancer: %w", err)
	}
	s := &Stack{Balancer: b, opts: opts}
	for i, region := range opts.Regions {
		udpPort, udp1Port := 0, 0
		if opts.UDPBasePort > 0 {
			udpPort = opts.UDPBasePort + i
		}
		if opts.UDP1BasePort > 0 {
			udp1Port = opts.UDP1BasePort + i
		}
		r, err := s.startRelay(region, udpPort, udp1Port)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Relays = append(s.Relays, r)
	}
	if err := s.waitRegistered(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Stack) startRelay(region string, udpPort, udp1Port int) (*relay.Server, error) {
	r, err := relay.New(relay.Options{
		Secret:            s.opts.Secret,
		BalancerURL:       s.Balancer.URL(),
		ListenHost:        s.opts.Host,
		PublicHost:        s.opts.Host,
		Region:            region,
		UDPPort:           udp1Port,
		UDPPortV2:         udpPort,
		HeartbeatInterval: s.opts.HeartbeatInterval,
		EmptyRoomTimeout:  s.opts.EmptyRoomTimeout,
		DrainTimeout:      s.opts.DrainTimeout,
		ActivationLease:   s.opts.ActivationLease,
		GrantLifetime:     s.opts.GrantLifetime,
		Clock:             s.opts.Clock,
		Version:           "dev",
		Logger:            s.opts.Logger.With("service", "relay", "region", region),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to configure the %s relay: %w", region, err)
	}
	if err := r.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the %s relay: %w", region, err)
	}
	return r, nil
}

// waitRegistered polls the balancer's relay list until every relay's boot is
// there.
func (s *Stack) waitRegistered(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.registered(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("failed to see every relay registered: %w", context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func (s *Stack) registered(ctx context.Context) bool {
	list, err := client.NewBalancer(s.Balancer.URL()).Instances(ctx, s.opts.Secret)
	if err != nil {
		return false
	}
	boots := map[string]bool{}
	for _, in := range list {
		boots[in.BootID] = true
	}
	for _, r := range s.Relays {
		if !boots[r.BootID()] {
			return false
		}
	}
	return true
}

// AdminKey is the balancer's /v1 admin key (Options.AdminKey, or the one
// it generated).
func (s *Stack) AdminKey() string {
	if k := s.Balancer.GeneratedAdminKey(); k != "" {
		return k
	}
	return s.opts.AdminKey
}

// AdminURL is the base of the balancer's /v1 admin API.
func (s *Stack) AdminURL() string { return s.Balancer.URL() + "/v1" }

// DashboardURL is the balancer's operator page (sign in with AdminKey).
func (s *Stack) DashboardURL() string { return s.Balancer.URL() + dashboard.Path }

// Admin is an admin API client of the stack.
func (s *Stack) Admin() *client.Admin { return client.NewAdmin(s.Balancer.URL(), s.AdminKey()) }

// Shutdown drains the relays, then stops the balancer.
func (s *Stack) Shutdown(ctx context.Context) error {
	var errs []error
	for _, r := range s.Relays {
		errs = append(errs, r.Shutdown(ctx))
	}
	errs = append(errs, s.Balancer.Shutdown(ctx))
	return errors.Join(errs...)
}

// Close stops everything at once.
func (s *Stack) Close() error {
	var errs []error
	for _, r := range s.Relays {
		errs = append(errs, r.Close())
	}
	errs = append(errs, s.Balancer.Close())
	return errors.Join(errs...)
}
