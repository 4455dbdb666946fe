package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/balancer"
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
			&cli.IntFlag{Name: "health-interval", EnvVars: []string{"HEALTH_INTERVAL_SECONDS"}, Value: 10, Usage: "seconds between relay health probes"},
			&cli.IntFlag{Name: "allocate-rate", EnvVars: []string{"ALLOCATE_RATE_PER_MINUTE"}, Value: 120, Usage: "room allocations a minute per source address, half of them at once (0: no limit)"},
			&cli.StringFlag{Name: "placement", EnvVars: []string{"BALANCER_PLACEMENT"}, Value: "least", Usage: "where new rooms go, after region, labels and capacity: least (least loaded), most (most loaded: pack relays) or random"},
			&cli.IntFlag{Name: "join-rate", EnvVars: []string{"JOIN_RATE_PER_MINUTE"}, Value: 600, Usage: "joins a minute per source address, half of them at once (0: no limit)"},
		}, httpLimitFlags()...),
		Action: runBalancer,
	}
}

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
	srv, err := balancer.New(balancer.Options{
		Placement:          placement,
		Secret:             secret,
		ListenHost:         host,
		Port:               c.Int("port"),
		Region:             os.Getenv("FLY_REGION"),
		MachineID:          os.Getenv("FLY_MACHINE_ID"),
		ImageRef:           os.Getenv("FLY_IMAGE_REF"),
		Version:            version(),
		HealthInterval:     seconds(c, "health-interval"),
		TombstoneRetention: seconds(c, "tombstone-retention"),
		HTTP:               httpLimits(c),
		AllocateRate:       perMinute(c.Int("allocate-rate")),
		JoinRate:           perMinute(c.Int("join-rate")),
		ClientIPHeader:     clientIPHeader(),
		Logger:             log,
		Metrics:            serviceMetrics(),
	})
	if err != nil {
		return usagef("invalid balancer configuration: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("failed to start the balancer: %w", err)
	}
	log.Info("balancer started", "url", srv.URL(), "boot", srv.BootID())
	<-c.Context.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}
