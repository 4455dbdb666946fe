package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/rollout"
)

// simPortBaseEnv moves `purrctl sim`'s ports, and those of the emulator's
// environment that launch and rollout deploy to.
const simPortBaseEnv = "PURRFLY_SIM_PORT_BASE"

// simDefaultConfig is `purrctl sim`'s --config: the organisation
// fly/rollout.toml's sim environment deploys to, and so the only one the
// sim seeds from it unless --rollout-config is given.
const simDefaultConfig = "fly/sim.toml"

func simCommand() *cli.Command {
	return &cli.Command{
		Name:  "sim",
		Usage: "run a local Fly.io (Machines API, proxy with Fly-Replay, internal DNS) with real machine processes",
		Flags: []cli.Flag{
			debugFlag(),
			&cli.StringFlag{Name: "config", Value: simDefaultConfig, Usage: "emulated organisation (apps, machines, images)"},
			&cli.StringFlag{Name: "state", Usage: "write the Machines API URL, token, DNS address and app URLs here as JSON once up"},
			&cli.StringFlag{Name: "log-dir", Usage: "machine output folder (default: a new temporary folder)"},
			&cli.BoolFlag{Name: "empty", Usage: "start an empty organisation: every app of the config reserved (addresses held), none created, no machine running"},
			&cli.IntFlag{Name: "port-base", EnvVars: []string{simPortBaseEnv},
				Usage: "move every port of the config (Machines API, proxies, public UDP, DNS) from its port_base to this one, so a second sim runs beside the first; launch and rollout follow " + simPortBaseEnv + " (0: the config's own)"},
			&cli.StringFlag{Name: "rollout-config", Value: "fly/rollout.toml", Usage: "start each app's machines on the config a rollout of --rollout-env would deploy (its fly.toml), so a first dry run shows only what you changed; read only for the default --config unless given (\"\": the sim config's own)"},
			&cli.StringFlag{Name: "rollout-env", Value: "sim", Usage: "the environment of --rollout-config whose apps seed the machines"},
		},
		Subcommands: []*cli.Command{simHostCommand()},
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
			if err := seedFromRollout(c, cfg); err != nil {
				return usagef("--rollout-config: %w", err)
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

// seedFromRollout sets each app's Seed to the config a rollout of
// --rollout-env would deploy, at the sim's port base. The default file
// missing (sim run from elsewhere), or another --config with no
// --rollout-config given (fly/chaos.toml has the same app names but
// environments of its own), leaves the sim config's own configs.
func seedFromRollout(c *cli.Context, cfg *flysim.Config) error {
	path := c.String("rollout-config")
	if path == "" {
		return nil
	}
	if !c.IsSet("rollout-config") && filepath.Clean(c.String("config")) != filepath.Clean(simDefaultConfig) {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && !c.IsSet("rollout-config") {
		return nil
	}
	file, err := rollout.LoadFile(path)
	if err != nil {
		return err
	}
	env, err := file.Env(c.String("rollout-env"))
	if err != nil {
		return err
	}
	if base := c.Int("port-base"); base != 0 && env.PortBase != 0 && base != env.PortBase {
		if err := env.MovePorts(base); err != nil {
			return err
		}
		if err := env.Validate(); err != nil {
			return err
		}
	}
	seeds := env.MachineConfigs("")
	for _, a := range cfg.Apps {
		if s, ok := seeds[a.Name]; ok {
			a.Seed = s
		}
	}
	return nil
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
