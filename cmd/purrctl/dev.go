package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/devstack"
	"github.com/purrfly/purrfly/wire"
)

// maxDevRelays bounds --regions: a local stack, not a fleet.
const maxDevRelays = 16

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run a balancer and one relay per region (default eu and us) on loopback, or --host, for local development",
		Flags: append([]cli.Flag{
			debugFlag(),
			&cli.StringFlag{Name: "host", Value: "127.0.0.1", Usage: "address every listener binds and every URL advertises: this machine's LAN address lets a phone on the same network play"},
			&cli.StringFlag{Name: "secret", Value: devstack.DefaultSecret, Usage: "shared relay/balancer secret of the stack"},
			&cli.StringSliceFlag{Name: "regions", Value: cli.NewStringSlice(devstack.DefaultRegions...), Usage: "one relay per region, in order (repeat a region for two relays there)"},
			&cli.IntFlag{Name: "port", Value: 8080, Usage: "balancer port on --host (0: any free port)"},
			&cli.IntFlag{Name: "udp-port", Value: 0, Usage: "LiteNetLib 2.x port of the first relay, the next ones counting up (0: any free ports)"},
			&cli.IntFlag{Name: "udp1-port", Value: 0, Usage: "LiteNetLib 1.x port (older PurrNet builds) of the first relay, the next ones counting up (0: any free ports)"},
			&cli.StringFlag{Name: "admin-key", EnvVars: []string{"ADMIN_KEY"}, Usage: "the balancer's /v1 admin key (default: one generated for the stack, printed)"},
		}, migrationFlags()...),
		Action: func(c *cli.Context) error {
			regions := c.StringSlice("regions")
			if len(regions) == 0 || len(regions) > maxDevRelays {
				return usagef("--regions takes 1 to %d regions", maxDevRelays)
			}
			for _, r := range regions {
				if r == "" || len(r) > wire.MaxRegionLen || strings.ContainsFunc(r, func(c rune) bool { return c <= ' ' || c > '~' }) {
					return usagef("--regions: %q is not a region name (1 to %d printable ASCII characters)", r, wire.MaxRegionLen)
				}
			}
			if err := devstack.CheckHost(c.String("host")); err != nil {
				return usagef("--host %w", err)
			}
			if !wire.ValidSecretList(c.String("secret")) {
				return usagef("--secret must be 1 to %d comma-separated values, each 1 to %d printable ASCII characters without spaces", wire.MaxSecrets, wire.MaxSecretLen)
			}
			stack, err := devstack.Start(c.Context, devstack.Options{
				Host:            c.String("host"),
				Secret:          c.String("secret"),
				Regions:         regions,
				BalancerPort:    c.Int("port"),
				UDPBasePort:     c.Int("udp-port"),
				UDP1BasePort:    c.Int("udp1-port"),
				AdminKey:        c.String("admin-key"),
				DrainTimeout:    2 * time.Second,
				ActivationLease: seconds(c, "migration-activation-timeout"),
				GrantLifetime:   seconds(c, "migration-grant-timeout"),
				Logger:          newLogger(c),
			})
			if err != nil {
				return err
			}
			w := c.App.Writer
			fmt.Fprintf(w, "purrfly dev stack is up.\n\n")
			fmt.Fprintf(w, "  Master server (paste into PurrTransport): %s\n\n", stack.Balancer.URL())
			for i, r := range stack.Relays {
				fmt.Fprintf(w, "  relay %-3s api %s  ws %s  udp %s  udp1 %s  boot %s\n", regions[i], r.HTTPURL(), r.WSURL(), r.UDPAddr(), r.UDP1Addr(), r.BootID())
			}
			fmt.Fprintf(w, "\n  Dashboard: %s  (sign in with the admin key)\n  Admin API: %s\n  Admin key: %s\n", stack.DashboardURL(), stack.AdminURL(), stack.AdminKey())
			fmt.Fprintf(w, "  (curl -H 'Authorization: Bearer <admin key>' %s/stats)\n", stack.AdminURL())
			fmt.Fprintf(w, "\n  Check it: go run ./cmd/purrctl smoke --balancer %s\n  Stop with Ctrl-C.\n", stack.Balancer.URL())
			<-c.Context.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return stack.Shutdown(ctx)
		},
	}
}
