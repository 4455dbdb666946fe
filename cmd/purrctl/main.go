// Command purrctl runs and operates a purrfly kit: the relay and balancer
// services, a local development stack, smoke checks and (later) the Fly
// emulator, load generation and rollouts. It is wiring only: flags and env,
// construction, output. The logic lives in the packages it calls.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/urfave/cli/v2"
)

// Exit codes (documented in README.md).
const (
	exitOK      = 0
	exitFailure = 1 // the operation ran and failed (smoke failed, service crashed)
	exitUsage   = 2 // bad flags, env or configuration
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run runs purrctl with args, writing to stdout and stderr, and returns
// the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:    "purrctl",
		Usage:   "run and operate a purrfly kit (PurrNet relay and balancer on Fly.io)",
		Version: version(),
		Commands: []*cli.Command{
			relayCommand(),
			balancerCommand(),
			devCommand(),
			smokeCommand(),
			simCommand(),
			benchCommand(),
			rolloutCommand(),
			launchCommand(),
			fleetCommand(),
			chaosCommand(),
			versionCommand(),
		},
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	enforce(app)
	// `fleet drain ID --admin-key K`: urfave/cli stops at the first
	// argument, so the subcommand's flags are put before it (flagsFirst).
	if len(args) > 3 && args[1] == "fleet" {
		args = append(slices.Clone(args[:3]), flagsFirst(args[3:])...)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := app.RunContext(ctx, args)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "purrctl:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitFailure
}

// usageError marks a configuration mistake (exit code 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }
