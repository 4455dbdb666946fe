package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/fleetview"
	"github.com/purrfly/purrfly/wire"
)

// fleetCommand is `purrctl fleet`: the balancer's admin API (/v1) as
// tables (or --json), with the operator's ADMIN_KEY.
func fleetCommand() *cli.Command {
	common := []cli.Flag{
		&cli.StringFlag{Name: "balancer", EnvVars: []string{"PURRFLY_BALANCER"}, Value: "http://127.0.0.1:8080", Usage: "balancer base URL"},
		&cli.StringFlag{Name: "admin-key", EnvVars: []string{"ADMIN_KEY"}, Usage: "the balancer's admin key (required)"},
		&cli.BoolFlag{Name: "json", Usage: "the API's JSON instead of a table (watch: one event per line)"},
		&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "bound on each request"},
	}
	sub := func(name, usage, args string, flags []cli.Flag, do func(*cli.Context, *client.Admin) error) *cli.Command {
		return &cli.Command{
			Name: name, Usage: usage, ArgsUsage: args, Flags: append(append([]cli.Flag{}, common...), flags...),
			Action: func(c *cli.Context) error {
				want := 0
				if args != "" {
					want = 1
				}
				if c.NArg() != want {
					if want == 0 {
						return usagef("purrctl fleet %s takes no arguments, got %q (run 'purrctl fleet %s --help')", name, c.Args().First(), name)
					}
					return usagef("purrctl fleet %s needs exactly one %s (run 'purrctl fleet %s --help')", name, args, name)
				}
				a, err := fleetAdmin(c)
				if err != nil {
					return err
				}
				return do(c, a)
			},
		}
	}
	return &cli.Command{
		Name:      "fleet",
		Usage:     "see and steer the fleet through the balancer's admin API: status, instances, rooms, drain, undrain, close, watch",
		ArgsUsage: "COMMAND",
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown fleet command %q (run 'purrctl fleet --help')", c.Args().First())
			}
			return usagef("purrctl fleet needs a command: status, instances, rooms, drain, undrain, close or watch (run 'purrctl fleet --help')")
		},
		Subcommands: []*cli.Command{
			sub("status", "the fleet's totals by region", "", nil, func(c *cli.Context, a *client.Admin) error {
				ctx, cancel := timeout(c)
				defer cancel()
				st, err := a.Stats(ctx)
				if err != nil {
					return err
				}
				return show(c, st, func(w io.Writer) error { return fleetview.WriteStats(w, st) })
			}),
			sub("instances", "the registered relays", "", nil, func(c *cli.Context, a *client.Admin) error {
				ctx, cancel := timeout(c)
				defer cancel()
				list, err := a.Instances(ctx)
				if err != nil {
					return err
				}
				return show(c, wire.InstancesResponse{Instances: list}, func(w io.Writer) error { return fleetview.WriteInstances(w, list) })
			}),
			sub("rooms", "the live rooms (filters combine)", "", []cli.Flag{
				&cli.StringFlag{Name: "region", Usage: "only this region"},
				&cli.StringFlag{Name: "instance", Usage: "only this relay (boot id, or the first 8 or more characters of one, or machine id)"},
				&cli.StringSliceFlag{Name: "label", Usage: "only relays with this label, key:value (repeatable)"},
				&cli.StringFlag{Name: "phase", Usage: "only this phase: waiting, active or vacant"},
				&cli.IntFlag{Name: "limit", Usage: "at most this many (default the balancer's, 1000)"},
				&cli.StringFlag{Name: "after", Usage: "the page after this room name"},
			}, func(c *cli.Context, a *client.Admin) error {
				switch c.String("phase") {
				case "", wire.RoomWaiting, wire.RoomActive, wire.RoomVacant:
				default:
					return usagef("--phase must be %s, %s or %s, got %q", wire.RoomWaiting, wire.RoomActive, wire.RoomVacant, c.String("phase"))
				}
				ctx, cancel := timeout(c)
				defer cancel()
				res, err := a.Rooms(ctx, client.RoomFilter{Region: c.String("region"), Instance: c.String("instance"),
					Labels: c.StringSlice("label"), Phase: c.String("phase"), Limit: c.Int("limit"), After: c.String("after")})
				if err != nil {
					return err
				}
				return show(c, res, func(w io.Writer) error { return fleetview.WriteRooms(w, res) })
			}),
			sub("drain", "stop placing new rooms on a relay (its rooms keep playing)", "ID", nil, func(c *cli.Context, a *client.Admin) error {
				return setDrain(c, a, true)
			}),
			sub("undrain", "give a drained relay back", "ID", nil, func(c *cli.Context, a *client.Admin) error {
				return setDrain(c, a, false)
			}),
			sub("close", "close a room at its relay: every socket closed, the name released", "NAME", nil, func(c *cli.Context, a *client.Admin) error {
				ctx, cancel := timeout(c)
				defer cancel()
				res, err := a.CloseRoom(ctx, c.Args().First())
				if err != nil {
					return err
				}
				return show(c, res, func(w io.Writer) error {
					if !res.Closed {
						_, err := fmt.Fprintf(w, "room %s was already closed\n", res.Name)
						return err
					}
					_, err := fmt.Fprintf(w, "closed room %s: %d socket(s) closed\n", res.Name, res.Connections)
					return err
				})
			}),
			sub("watch", "follow the fleet's events until Ctrl-C (or --count, --for)", "", []cli.Flag{
				&cli.IntFlag{Name: "count", Usage: "stop after this many events (0: no limit)"},
				&cli.DurationFlag{Name: "for", Usage: "stop after this long (0: until Ctrl-C)"},
				&cli.DurationFlag{Name: "idle", Value: time.Minute, Usage: "give up when nothing arrives for this long, not even the balancer's ping (every 15 s by default): a half-open connection (0: wait forever)"},
			}, watch),
		},
	}
}

// fleetAdmin is the admin client of the command's flags.
func fleetAdmin(c *cli.Context) (*client.Admin, error) {
	u, err := httpURL(c, "balancer", false)
	if err != nil {
		return nil, err
	}
	key := c.String("admin-key")
	if key == "" {
		return nil, usagef("set ADMIN_KEY (or --admin-key): the balancer's admin key, as purrctl dev prints it")
	}
	return client.NewAdmin(u, key), nil
}

func timeout(c *cli.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Context, c.Duration("timeout"))
}

// show writes v as JSON with --json, else the table.
func show(c *cli.Context, v any, table func(io.Writer) error) error {
	if c.Bool("json") {
		return json.NewEncoder(c.App.Writer).Encode(v)
	}
	return table(c.App.Writer)
}

func setDrain(c *cli.Context, a *client.Admin, on bool) error {
	ctx, cancel := timeout(c)
	defer cancel()
	id := c.Args().First()
	do, verb := a.Undrain, "undrained"
	if on {
		do, verb = a.Drain, "drained"
	}
	in, err := do(ctx, id)
	if err != nil {
		return err
	}
	return show(c, in, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s relay %s (%s): now %s, %d room(s), %d player(s)\n", verb, in.BootID, in.Region, in.Status, in.Rooms, in.Connections)
		return err
	})
}

// watch prints each event of GET /v1/events, bounded by --count and --for.
func watch(c *cli.Context, a *client.Admin) error {
	ctx, cancel := c.Context, func() {}
	if d := c.Duration("for"); d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	defer cancel()
	stream, err := a.Events(ctx)
	if err != nil {
		return err
	}
	if d := c.Duration("idle"); d > 0 {
		stream.WithIdle(nil, d)
	}
	defer stream.Close()
	enc := json.NewEncoder(c.App.Writer)
	for n := 0; c.Int("count") == 0 || n < c.Int("count"); {
		f, err := stream.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil // --for ran out, or Ctrl-C
			}
			return fmt.Errorf("the event stream ended: %w", err)
		}
		if f.Event.Type == "" {
			continue // a ping comment
		}
		n++
		if c.Bool("json") {
			err = enc.Encode(f.Event)
		} else {
			_, err = fmt.Fprintln(c.App.Writer, fleetview.EventLine(f.Event))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
