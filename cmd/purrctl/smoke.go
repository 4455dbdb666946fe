package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/client"
)

func smokeCommand() *cli.Command {
	return &cli.Command{
		Name:  "smoke",
		Usage: "allocate a room, connect a host and a client, exchange packets both ways, check the notices",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "balancer", EnvVars: []string{"PURRFLY_BALANCER"}, Value: "http://127.0.0.1:8080", Usage: "balancer base URL"},
			&cli.StringFlag{Name: "region", Usage: "region to allocate in (empty: any)"},
			&cli.BoolFlag{Name: "strict-region", Usage: "fail when the room lands in another region"},
			&cli.StringFlag{Name: "room", Usage: "room name (default: a fresh random name)"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "bound on each step"},
			&cli.BoolFlag{Name: "no-session-hint", Usage: "connect like PurrNet's own client, without the ?s= affinity hint"},
		},
		Action: func(c *cli.Context) error {
			w := c.App.Writer
			rep, err := client.Smoke(c.Context, client.SmokeOptions{
				Balancer:      c.String("balancer"),
				Region:        c.String("region"),
				StrictRegion:  c.Bool("strict-region"),
				Room:          c.String("room"),
				Timeout:       c.Duration("timeout"),
				NoSessionHint: c.Bool("no-session-hint"),
				Logf: func(format string, args ...any) {
					fmt.Fprintf(w, "  "+format+"\n", args...)
				},
			})
			if err != nil {
				return err
			}
			_ = rep // Smoke's last log line is the summary.
			return nil
		},
	}
}
