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
			&cli.StringFlag{Name: "transport", Value: "both", Usage: "ws (WebGL builds), udp (LiteNetLib 2.x: desktop, mobile, Editor), udp1 (LiteNetLib 1.x: builds before PurrNet's move to 2.x), both (ws and udp) or all (the three), one after the other"},
			&cli.BoolFlag{Name: "migration", Usage: "check host migration instead: a graceful handoff to a client, then recovery from a host crash"},
		},
		Action: func(c *cli.Context) error {
			balancerURL, err := httpURL(c, "balancer", false)
			if err != nil {
				return err
			}
			var trs []client.Transport
			switch v := c.String("transport"); v {
			case "both":
				trs = []client.Transport{client.TransportWebSocket, client.TransportUDP}
			case "all":
				trs = []client.Transport{client.TransportWebSocket, client.TransportUDP, client.TransportUDP1}
			default:
				tr, ok := client.ParseTransport(v)
				if !ok {
					return usagef("--transport must be ws, udp, udp1, both or all")
				}
				trs = []client.Transport{tr}
			}
			w := c.App.Writer
			for _, tr := range trs {
				fmt.Fprintf(w, "smoke over %s:\n", tr)
				run := client.Smoke
				if c.Bool("migration") {
					run = client.SmokeMigration
				}
				// Each run gets its own room (unless --room names one).
				_, err := run(c.Context, client.SmokeOptions{
					Balancer:      balancerURL,
					Region:        c.String("region"),
					StrictRegion:  c.Bool("strict-region"),
					Room:          c.String("room"),
					Timeout:       c.Duration("timeout"),
					NoSessionHint: c.Bool("no-session-hint"),
					Transport:     tr,
					Logf: func(format string, args ...any) {
						fmt.Fprintf(w, "  "+format+"\n", args...)
					},
				})
				if err != nil {
					return err // Smoke's last log line is the summary.
				}
			}
			return nil
		},
	}
}
