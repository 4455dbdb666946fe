package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/flysim"
)

// simPortBaseEnv moves `purrctl sim`'s ports, and those of the emulator's
// environment that launch and rollout deploy to.
const simPortBaseEnv = "PURRFLY_SIM_PORT_BASE"

func simCommand() *cli.Command {
	return &cli.Command{
		Name:  "sim",
		Usage: "run a local Fly.io (Machines API, proxy with Fly-Replay, internal DNS) with real machine processes",
		Flags: []cli.Flag{
			debugFlag(),
			&cli.StringFlag{Name: "config", Value: "fly/sim.toml", Usage: "emulated organisation (apps, machines, images)"},
			&cli.StringFlag{Name: "state", Usage: "write the Machines API URL, token, DNS address and app URLs here as JSON once up"},
			&cli.StringFlag{Name: "log-dir", Usage: "machine output folder (default: a new temporary folder)"},
			&cli.BoolFlag{Name: "empty", Usage: "start an empty organisation: every app of the config reserved (addresses held), none created, no machine running"},
			&cli.IntFlag{Name: "port-base", EnvVars: []string{simPortBaseEnv},
				Usage: "move every port of the config (Machines API, proxies, public UDP, DNS) from its port_base to this one, so a second sim runs beside the first; launch and rollout follow " + simPortBaseEnv + " (0: the config's own)"},
		},
		Action: func(c *cli.Context) error {
			cfg, err := flysim.LoadConfig(c.String("config"))
			if err != nil {
				return usagef("%w", err)
			}
			if c.Bool("empty") {
				cfg.Empty()
			}
			if base := c.Int("port-base"); base != 0 {
				if err := cfg.MovePorts(base); err != nil {
					return usagef("--port-base (%s): %w", simPortBaseEnv, err)
				}
			}
			sim, err := flysim.New(cfg, flysim.Options{
				LogDir: c.String("log-dir"),
				Logger: newLogger(c),
				Stdout: c.App.Writer,
			})
			if err != nil {
				return usagef("%w", err)
			}
			defer sim.Close()
			if err := sim.Start(c.Context); err != nil {
				return fmt.Errorf("failed to start the emulator: %w", err)
			}
			if path := c.String("state"); path != "" {
				if err := writeState(path, sim.State()); err != nil {
					return err
				}
			}
			<-c.Context.Done()
			return sim.Close()
		},
	}
}

// writeState writes the state file atomically (a reader never sees half).
func writeState(path string, st flysim.State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".state-*")
	if err != nil {
		return fmt.Errorf("failed to write state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("failed to write state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("failed to write state: %w", err)
	}
	return nil
}
