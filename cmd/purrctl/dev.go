package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/devstack"
)

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run a balancer and two relays (regions eu and us) on loopback for local development",
		Flags: append([]cli.Flag{
			debugFlag(),
			&cli.IntFlag{Name: "port", Value: 8080, Usage: "balancer port on 127.0.0.1 (0: any free port)"},
			&cli.IntFlag{Name: "udp-port", Value: 0, Usage: "LiteNetLib port of the first relay, the next ones counting up (0: any free ports)"},
		}, migrationFlags()...),
		Action: func(c *cli.Context) error {
			stack, err := devstack.Start(c.Context, devstack.Options{
				BalancerPort:    c.Int("port"),
				UDPBasePort:     c.Int("udp-port"),
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
				fmt.Fprintf(w, "  relay %-3s api %s  ws %s  udp %s  boot %s\n", devstack.DefaultRegions[i], r.HTTPURL(), r.WSURL(), r.UDPAddr(), r.BootID())
			}
			fmt.Fprintf(w, "\n  Check it: go run ./cmd/purrctl smoke --balancer %s\n  Stop with Ctrl-C.\n", stack.Balancer.URL())
			<-c.Context.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return stack.Shutdown(ctx)
		},
	}
}
