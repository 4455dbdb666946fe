package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/flyaffinity"
	"github.com/purrfly/purrfly/wire"
)

func balancerCommand() *cli.Command {
	return &cli.Command{
		Name:  "balancer",
		Usage: "run the balancer (PurrBalancer): relays register with it; clients allocate and join rooms through it",
		Flags: append([]cli.Flag{
			secretFlag(), debugFlag(),
			&cli.StringFlag{Name: "host", EnvVars: []string{"HOST"}, Usage: "bind address (default 127.0.0.1, :: on Fly)"},
			&cli.IntFlag{Name: "port", EnvVars: []string{"PORT"}, Value: 8080, Usage: "HTTP port"},
			&cli.IntFlag{Name: "tombstone-retention", EnvVars: []string{"ROOM_PUBLICATION_TOMBSTONE_RETENTION_SECONDS"}, Value: 3600, Usage: "seconds released room publications stay fenced (non-positive: 3600)"},
			&cli.IntFlag{Name: "max-tombstones", EnvVars: []string{"BALANCER_MAX_TOMBSTONES"}, Value: balancer.DefaultMaxTombstones, Usage: "tombstones held at once (at least 1), two per released room; past it the oldest go first"},
			&cli.IntFlag{Name: "health-interval", EnvVars: []string{"HEALTH_INTERVAL_SECONDS"}, Value: 10, Usage: "seconds between relay health probes"},
			&cli.IntFlag{Name: "allocate-rate", EnvVars: []string{"ALLOCATE_RATE_PER_MINUTE"}, Value: 120, Usage: "room allocations a minute per source address, half of them at once (0: no limit)"},
			&cli.StringFlag{Name: "placement", EnvVars: []string{"BALANCER_PLACEMENT"}, Value: "least", Usage: "where new rooms go, after region, labels and capacity: least (least loaded), most (most loaded: pack relays) or random"},
			&cli.IntFlag{Name: "join-rate", EnvVars: []string{"JOIN_RATE_PER_MINUTE"}, Value: 600, Usage: "joins a minute per source address, half of them at once (0: no limit)"},
			&cli.IntFlag{Name: "relay-inflight", EnvVars: []string{"BALANCER_RELAY_INFLIGHT"}, Value: balancer.DefaultRelayInflight, Usage: "allocation calls sent to one relay at once; past it the next relay is tried, or 429 instance_busy"},
			&cli.StringFlag{Name: "standby-for", EnvVars: []string{wire.EnvBalancerStandbyFor}, Usage: "this machine is the standby of that balancer machine (set by purrctl launch and rollout): it serves only while that one does not answer"},
			&cli.IntFlag{Name: "settle-seconds", EnvVars: []string{"BALANCER_SETTLE_SECONDS"}, Usage: "seconds after it starts serving during which allocations, and joins and migration calls for rooms not known yet, answer 503 balancer_settling while relays republish their rooms (0: none; fly/balancer.toml sets 2)"},
			&cli.IntFlag{Name: "max-rooms-per-source", EnvVars: []string{"BALANCER_MAX_ROOMS_PER_SOURCE"}, Value: balancer.DefaultMaxRoomsPerSource, Usage: "live rooms one source address's allocations may hold at once (0: no limit)"},
		}, append(adminFlags(), httpLimitFlags()...)...),
		Action: runBalancer,
	}
}

// adminFlags configure the /v1 admin API.
func adminFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "admin-key", EnvVars: []string{"ADMIN_KEY"}, Usage: "the operator's key(s) of the /v1 admin API, comma-separated for rotation (at least 16 characters, not SECRET; required on Fly, generated and printed once elsewhere)"},
		&cli.BoolFlag{Name: "trust-proxy", EnvVars: []string{"BALANCER_TRUST_PROXY"}, Usage: "take /v1 callers' addresses (auth throttle, audit log) from X-Forwarded-For's last hop (the one the proxy appended): only behind a proxy that appends it"},
		&cli.StringFlag{Name: "admin-cors-origins", EnvVars: []string{"ADMIN_CORS_ORIGINS"}, Usage: "browser origins allowed to call /v1, comma-separated (default none)"},
		&cli.BoolFlag{Name: "admin-sse-query-key", EnvVars: []string{"ADMIN_SSE_QUERY_KEY"}, Usage: "accept the admin key as ?key= on /v1/events (browsers' EventSource cannot send headers; query strings land in proxy logs)"},
	}
}

// roomsPerSource maps the flag (0: no limit) to Options.MaxRoomsPerSource
// (negative: no limit).
func roomsPerSource(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(v string) []string { return balancer.ParseAdminKeys(v) }

func runBalancer(c *cli.Context) error {
	secret, err := sharedSecret(c)
	if err != nil {
		return err
	}
	host := c.String("host")
	if host == "" {
		host = defaultListenHost()
	}
	placement, err := balancer.ParseStrategy(c.String("placement"))
	if err != nil {
		return usagef("BALANCER_PLACEMENT must be least, most or random")
	}
	log := newLogger(c)
	peers, closePeers := balancerPeers(c.Int("port"), log)
	defer closePeers()
	srv, err := balancer.New(balancer.Options{
		Placement:          placement,
		Secret:             secret,
		ListenHost:         host,
		Port:               c.Int("port"),
		Region:             flyEnv().Region,
		MachineID:          flyEnv().MachineID,
		ImageRef:           flyEnv().ImageRef,
		Version:            version(),
		HealthInterval:     seconds(c, "health-interval"),
		TombstoneRetention: seconds(c, "tombstone-retention"),
		MaxTombstones:      c.Int("max-tombstones"),
		HTTP:               httpLimits(c),
		AllocateRate:       perMinute(c.Int("allocate-rate")),
		JoinRate:           perMinute(c.Int("join-rate")),
		MaxRoomsPerSource:  roomsPerSource(c.Int("max-rooms-per-source")),
		RelayInflight:      c.Int("relay-inflight"),
		ClientIPHeader:     clientIPHeader(),
		AdminKeys:          balancer.ParseAdminKeys(c.String("admin-key")),
		RequireAdminKey:    onFly(),
		TrustProxy:         c.Bool("trust-proxy"),
		AdminCORSOrigins:   splitList(c.String("admin-cors-origins")),
		SSEQueryKey:        c.Bool("admin-sse-query-key"),
		StandbyFor:         c.String("standby-for"),
		Peers:              peers,
		SettleWindow:       seconds(c, "settle-seconds"),
		Logger:             log,
	})
	if err != nil {
		return usagef("invalid balancer configuration: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("failed to start the balancer: %w", err)
	}
	log.Info("balancer started", "url", srv.URL(), "boot", srv.BootID())
	if k := srv.GeneratedAdminKey(); k != "" {
		showGeneratedKey(log, srv.URL(), k)
	}
	select {
	case <-c.Context.Done():
	case <-srv.Yielded():
		// A standby whose primary serves: exit 0, and the machine is
		// stopped again (its restart policy restarts only failures).
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// balancerPeers finds the balancer app's other machines through Fly's
// internal DNS (FLY_DNS_SERVER under flysim) when on Fly; off Fly, none.
func balancerPeers(port int, log *slog.Logger) (balancer.Peers, func()) {
	env := flyEnv()
	if !env.OnFly() || env.MachineID == "" {
		return balancer.Peers{}, func() {}
	}
	r := flyaffinity.NewWithConfig(flyaffinity.Config{App: env.AppName, Self: env.MachineID, DNSServer: env.DNSServer,
		PeerPort: port, Logger: log.With("component", "balancer-peers")})
	return balancer.Peers{Running: r.Started, URL: r.MachineURL}, r.Close
}

// showGeneratedKey prints a generated admin key once, to the controlling
// terminal only: stdout and stderr may be a log (the logger writes to
// stderr), and a key must never land in one. Without a terminal the key
// is not shown at all, and the log says how to have one.
func showGeneratedKey(log *slog.Logger, url, key string) {
	tty, ok := terminal()
	if !ok {
		log.Warn("generated an admin key for /v1 but no terminal is attached to show it on; set ADMIN_KEY to choose one")
		return
	}
	defer tty.Close()
	fmt.Fprintf(tty, "admin key for %s/v1 (generated for this process; set ADMIN_KEY to keep one): %s\n", url, key)
}
