// Command purrctl runs and operates a purrfly kit: the relay and balancer
// services, a local development stack, smoke checks, the Fly emulator, load
// generation, chaos soaks, deploys and the fleet's admin API. It is wiring only: flags and env,
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

// newApp is the whole command tree, with the CLI contract applied.
func newApp(stdout, stderr io.Writer) *cli.App {
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
	return app
}

// run runs purrctl with args, writing to stdout and stderr, and returns
// the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
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
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "purrctl:", err)
		return exitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		fmt.Fprintln(stderr, "purrctl:", err)
		return ec.ExitCode()
	}
	// A command stopped by Ctrl-C or SIGTERM failed because it was
	// stopped, not because what it measured or checked is wrong: say so,
	// and exit as an interrupted rollout does. (A command that ends
	// normally on a signal, such as a service or dev, returns nil.)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "purrctl: interrupted:", interruptedSummary(err))
		return exitInterrupted
	}
	fmt.Fprintln(stderr, "purrctl:", err)
	return exitFailure
}

// interrupted is the error a command returns when a signal stopped it
// before it could judge its result; its text says what had been done.
type interrupted struct{ done string }

func (e interrupted) Error() string { return e.done }

// interruptedSummary is what to say of a command stopped by a signal: its
// own account when it gave one, else only that it stopped.
func interruptedSummary(err error) string {
	var in interrupted
	if errors.As(err, &in) {
		return in.done
	}
	return "stopped before it finished; nothing was judged"
}

// usageError marks a configuration mistake (exit code 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }
