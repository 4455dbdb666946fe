package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/rollout"
)

// Exit codes of `purrctl rollout` (documented in README.md).
const (
	exitRolledBack  = 3   // the rollout failed and --rollback restored the failed machine
	exitInterrupted = 130 // interrupted (Ctrl-C, SIGTERM, its output closed); leases released
)

func rolloutCommand() *cli.Command {
	return deployCommand("rollout", "deploy an image: relays one machine at a time (a proven replacement first, the old one retiring when its games end; --strategy in-place drains and updates it), then the balancer, then registration and smoke checks",
		"deploy an image to ENV (fly/rollout.toml)", "ENV --image REF [--dry-run] [--rollback] [--json]", rolloutFlags(), rollout.Run)
}

// launchCommand is `purrctl launch ENV`: create what the fleet lacks, then
// the same verification and smoke as a rollout.
func launchCommand() *cli.Command {
	flags := slices.DeleteFunc(rolloutFlags(), func(f cli.Flag) bool { return f.Names()[0] == "rollback" })
	flags = append(flags, &cli.StringFlag{Name: "admin-key", EnvVars: []string{"ADMIN_KEY"},
		Usage: "the balancer's ADMIN_KEY, set as its app secret when it has none (required then)"})
	return deployCommand("launch", "create what ENV's fleet lacks (apps, addresses, SECRET, machines: balancer first), then verify and smoke-test it like a rollout",
		"create ENV's fleet from its fly.tomls (fly/rollout.toml)", "ENV --image REF [--dry-run] [--json]", flags, rollout.Launch)
}

// deployCommand is rollout or launch: the same flags, output and exit codes.
func deployCommand(name, usage, innerUsage, argsUsage string, flags []cli.Flag, do func(context.Context, rollout.Options) (*rollout.Result, error)) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: argsUsage,
		// urfave/cli v2 stops at the first argument, but the documented
		// form is `rollout prod --image REF`: flags are parsed after the
		// arguments are put in order (flagsFirst).
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			inner := &cli.App{
				Name:            "purrctl " + name,
				UsageText:       "purrctl " + name + " " + argsUsage,
				HideHelpCommand: true,
				Usage:           innerUsage,
				ArgsUsage:       "ENV",
				Flags:           flags,
				Action:          func(c *cli.Context) error { return runDeploy(c, name, do) },
				Writer:          c.App.Writer,
				ErrWriter:       c.App.ErrWriter,
				ExitErrHandler:  func(*cli.Context, error) {},
				OnUsageError: func(_ *cli.Context, err error, _ bool) error {
					return usagef("%w (run 'purrctl %s --help')", err, name)
				},
			}
			return inner.RunContext(c.Context, append([]string{"purrctl " + name}, flagsFirst(c.Args().Slice())...))
		},
	}
}

func rolloutFlags() []cli.Flag {
	return []cli.Flag{
		debugFlag(),
		&cli.StringFlag{Name: "image", Usage: "image reference every machine ends up on (registry.fly.io/<app>:<label>)"},
		&cli.StringFlag{Name: "config", Value: "fly/rollout.toml", Usage: "environments file"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the plan and change nothing"},
		&cli.BoolFlag{Name: "rollback", Usage: "when a machine fails after its update, put it back on its previous image and verify it (overlap: the old machine was never touched)"},
		&cli.StringFlag{Name: "strategy", Value: string(rollout.StrategyOverlap), Usage: "relay machines: overlap (a proven replacement first, then the old one retires when its games end) or in-place (drain for the drain window, then update: games still playing are cut off)"},
		&cli.BoolFlag{Name: "wait-retired", Usage: "after the rollout, wait until every retiring relay machine has stopped (and destroy it)"},
		&cli.BoolFlag{Name: "json", Usage: "one JSON event per line"},
		&cli.StringFlag{Name: "token", EnvVars: []string{"FLY_API_TOKEN"}, Usage: "Machines API token"},
		&cli.StringFlag{Name: "secret", EnvVars: []string{"SECRET"}, Usage: "shared secret of the balancer's admin API"},
		&cli.StringFlag{Name: "machines-api", EnvVars: []string{"FLY_FLAPS_BASE_URL"}, Usage: "Machines API base URL (default: the environment's, else https://api.machines.dev)"},
		&cli.IntFlag{Name: "sim-port-base", EnvVars: []string{simPortBaseEnv},
			Usage: "for the emulator's environment (one with port_base): the port base purrctl sim --port-base was given; every port of the environment moves with it (0: its own)"},
	}
}

// flagsFirst moves positional arguments behind the flags (a flag's value
// stays with it), so `rollout prod --image X` parses like `rollout --image
// X prod`.
func flagsFirst(args []string) []string {
	bools := map[string]bool{"debug": true, "dry-run": true, "rollback": true, "json": true, "help": true, "h": true, "wait-retired": true}
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && !bools[name] && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		default:
			pos = append(pos, a)
		}
	}
	return append(flags, pos...)
}

func runDeploy(c *cli.Context, name string, do func(context.Context, rollout.Options) (*rollout.Result, error)) error {
	if c.NArg() != 1 {
		return usagef("%s needs exactly one environment name (see --config)", name)
	}
	if c.String("image") == "" {
		return usagef("%s needs --image REF", name)
	}
	machinesAPI, err := httpURL(c, "machines-api", true)
	if err != nil {
		return err
	}
	strategy, err := rollout.ParseStrategy(c.String("strategy"))
	if err != nil {
		return usagef("--%w", err)
	}
	file, err := rollout.LoadFile(c.String("config"))
	if err != nil {
		return usagef("%w", err)
	}
	env, err := file.Env(c.Args().First())
	if err != nil {
		return usagef("%w", err)
	}
	// An emulator's environment follows `purrctl sim --port-base`; any
	// other ignores the variable (a shell may export it for both).
	if base := c.Int("sim-port-base"); base != 0 && env.PortBase != 0 && base != env.PortBase {
		if err := env.MovePorts(base); err != nil {
			return usagef("--sim-port-base (%s): %w", simPortBaseEnv, err)
		}
		if err := env.Validate(); err != nil {
			return usagef("environment %s at port base %d: %w", env.Name, base, err)
		}
	}
	// A write to a closed stdout (`rollout ... | head -3`) must not kill
	// the process by SIGPIPE with its lease held: noticed, the write fails
	// with EPIPE instead, which stops the rollout like Ctrl-C (leases
	// released, relay undrained, exit 130).
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	ctx, stop := context.WithCancelCause(c.Context)
	defer stop(nil)
	tty := isTerminal(c.App.Writer)
	w := rollout.StopOnWriteError(c.App.Writer, stop)
	observer, finish := printer(c, w, tty)
	res, err := do(ctx, rollout.Options{
		Env: env, Image: c.String("image"), Token: c.String("token"), Secret: c.String("secret"),
		MachinesAPI: machinesAPI, DryRun: c.Bool("dry-run"), Rollback: c.Bool("rollback"), AdminKey: c.String("admin-key"),
		Strategy: strategy, WaitRetired: c.Bool("wait-retired"),
		Observer: observer, Logger: newLogger(c),
	})
	finish()
	var ce *rollout.ConfigError
	if errors.As(err, &ce) {
		return usagef("%w", err)
	}
	var pe *rollout.PanicError
	if errors.As(err, &pe) {
		fmt.Fprintf(c.App.ErrWriter, "purrctl: %v\n%s", pe, pe.Stack)
	}
	var f *rollout.Failure
	if errors.As(err, &f) {
		if c.Bool("json") {
			_ = json.NewEncoder(w).Encode(map[string]any{"error": f.Error(), "fleet": f.Fleet})
		} else {
			fmt.Fprintln(w)
			rollout.WriteFleet(w, f.Fleet)
		}
		switch {
		case f.Interrupted():
			return cli.Exit(err.Error(), exitInterrupted)
		case f.RolledBack:
			return cli.Exit(err.Error(), exitRolledBack)
		}
		return err
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return json.NewEncoder(w).Encode(res)
	}
	fmt.Fprintln(w)
	rollout.WriteFleet(w, res.Machines)
	if len(res.Retiring) > 0 {
		fmt.Fprintln(w)
		rollout.WriteRetiring(w, res.Retiring)
	}
	return nil
}

// printer picks the output: --json, a live line per machine on a terminal,
// else (CI=true, a pipe, a file) one plain line per event.
func printer(c *cli.Context, w io.Writer, tty bool) (func(rollout.Event), func()) {
	switch {
	case c.Bool("json"):
		return rollout.JSONPrinter(w), func() {}
	case tty && os.Getenv("CI") != "true":
		return rollout.NewLivePrinter(w).Event, func() {}
	default:
		return rollout.PlainPrinter(w), func() {}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
