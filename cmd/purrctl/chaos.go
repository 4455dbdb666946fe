package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/chaos"
	"github.com/purrfly/purrfly/flysim"
)

func chaosCommand() *cli.Command {
	return &cli.Command{
		Name:  "chaos",
		Usage: "chaos soak: rooms of real clients play while relays and the balancer are killed, machines stopped, links cut and DNS goes stale; invariants reported",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Value: "fly/chaos.toml", Usage: "the organisation `FILE` to storm (when attaching: the one purrctl sim --config runs)"},
			&cli.StringFlag{Name: "state", Usage: "attach to a running sim through the `FILE` its --state wrote (default: run the organisation in this process)"},
			&cli.StringFlag{Name: "log-dir", Usage: "machine log folder (the sim's --log-dir when attaching; scanned for secrets)"},
			&cli.DurationFlag{Name: "duration", Value: chaosDefaultDuration, Usage: "how long the storm lasts, at least 1m (every fault kind runs once); starting the organisation before and settling after add up to about 2 minutes"},
			&cli.Uint64Flag{Name: "seed", Usage: "fault and room RNG seed (0: random; printed, so a run can be repeated)"},
			&cli.IntFlag{Name: "rooms", Value: 6, Usage: "rooms playing at once (at most 64)"},
			&cli.IntFlag{Name: "players", Value: 2, Usage: "players per room (at most 8)"},
			&cli.DurationFlag{Name: "room-lifetime", Value: chaosDefaultLifetime, Usage: "mean life of a room before its host leaves"},
			&cli.DurationFlag{Name: "fault-gap", Value: chaosDefaultGap, Usage: "mean pause between faults"},
			&cli.IntFlag{Name: "max-faults", Usage: "faults at most (default one per 5 s of duration)"},
			&cli.BoolFlag{Name: "rival", Usage: "add partition_rival: a second host takes a cut relay's room name elsewhere; the split must end once the partition heals"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON instead of a table"},
			&cli.BoolFlag{Name: "quiet", Usage: "no progress lines on stderr"},
		},
		Action: runChaos,
	}
}

func runChaos(c *cli.Context) error {
	cfg, err := flysim.LoadConfig(c.String("config"))
	if err != nil {
		return usagef("%w", err)
	}
	o := chaos.Options{
		Config: cfg, LogDir: c.String("log-dir"),
		Sim:      flysim.Options{LogDir: c.String("log-dir"), Logger: slog.New(slog.DiscardHandler)},
		Duration: c.Duration("duration"), Seed: c.Uint64("seed"), Rooms: c.Int("rooms"), Players: c.Int("players"),
		RoomLifetime: c.Duration("room-lifetime"), FaultGap: c.Duration("fault-gap"), MaxFaults: c.Int("max-faults"), Rival: c.Bool("rival"),
	}
	if !c.Bool("quiet") {
		o.Progress = c.App.ErrWriter
		if o.Progress == nil {
			o.Progress = os.Stderr
		}
	}
	if path := c.String("state"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return usagef("read state: %w", err)
		}
		var st flysim.State
		if err := json.Unmarshal(b, &st); err != nil {
			return usagef("state %s: %w", path, err)
		}
		o.State = &st
	}
	rep, err := chaos.Run(c.Context, o)
	var stopped *chaos.InterruptedError
	if errors.As(err, &stopped) {
		return interrupted{stopped.Error()}
	}
	if err != nil {
		return err
	}
	out := io.Writer(c.App.Writer)
	if c.Bool("json") {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteTable(out)
	}
	if n := rep.Total(); n > 0 {
		return cli.Exit(fmt.Sprintf("chaos: %d invariant violations (seed %d)", n, rep.Seed), exitFailure)
	}
	return nil
}

// Defaults of purrctl chaos.
const (
	chaosDefaultDuration = time.Minute
	chaosDefaultLifetime = 20 * time.Second
	chaosDefaultGap      = 2 * time.Second
	// chaosMinDuration: the storm injects every fault kind once before
	// --duration can end it, which takes about a minute; a shorter
	// --duration would be a promise the run cannot keep.
	chaosMinDuration = time.Minute
)
