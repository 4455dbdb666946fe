package main

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// runAction parses args with cmd's own flags (their names, environment
// variables and defaults, as `purrctl <cmd>` would) and runs fn in place
// of the command's action.
func runAction(t *testing.T, cmd *cli.Command, fn func(*cli.Context) error, args ...string) error {
	t.Helper()
	cmd.Action = fn
	app := &cli.App{Name: "purrctl", Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard,
		ExitErrHandler: func(*cli.Context, error) {}}
	return app.Run(append([]string{"purrctl", cmd.Name}, args...))
}

// unsetenv removes name for the test (restored afterwards).
func unsetenv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "")
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

// TestSecretDefaultsToPURRNETOffFly: the balancer and its relays share one
// routing SECRET. Off Fly (a local or self-hosted setup among friends) it
// needs no setting and is PURRNET unless both services are given another;
// the Fly deploy demands one set explicitly. Checked for both services'
// commands.
func TestSecretDefaultsToPURRNETOffFly(t *testing.T) {
	for _, mk := range []func() *cli.Command{relayCommand, balancerCommand} {
		name := mk().Name
		secret := func(t *testing.T, args ...string) (string, error) {
			t.Helper()
			var got string
			err := runAction(t, mk(), func(c *cli.Context) error {
				var err error
				got, err = sharedSecret(c)
				return err
			}, args...)
			return got, err
		}
		t.Run(name, func(t *testing.T) {
			unsetenv(t, "FLY_APP_NAME")
			unsetenv(t, "SECRET")
			if got, err := secret(t); err != nil || got != "PURRNET" {
				t.Fatalf("purrctl %s without SECRET: %q, %v; want the default PURRNET", name, got, err)
			}
			t.Setenv("SECRET", "our-own-secret")
			if got, err := secret(t); err != nil || got != "our-own-secret" {
				t.Fatalf("purrctl %s with SECRET=our-own-secret: %q, %v", name, got, err)
			}
			if got, err := secret(t, "--secret", "from-the-flag"); err != nil || got != "from-the-flag" {
				t.Fatalf("purrctl %s --secret from-the-flag: %q, %v (flags win over the environment)", name, got, err)
			}

			unsetenv(t, "SECRET")
			t.Setenv("FLY_APP_NAME", "purrfly-test")
			_, err := secret(t)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("purrctl %s on Fly without SECRET: %v, want a usage error naming SECRET", name, err)
			}
		})
	}
}

// TestTombstoneRetentionReadsItsVariable guards the seed's
// "ROOM_PUBLICATION_TOMBSTONE_RETENTION_SECONDS defaults to 3600 seconds"
// where the operator sets it: `purrctl balancer` reads that variable (and
// --tombstone-retention) and passes 3600 s when neither is set. Non-positive
// values reach the balancer as they are and fall back there
// (balancer.TestTombstoneRetentionDefaultsTo3600Seconds).
func TestTombstoneRetentionReadsItsVariable(t *testing.T) {
	const env = "ROOM_PUBLICATION_TOMBSTONE_RETENTION_SECONDS"
	retention := func(t *testing.T, args ...string) time.Duration {
		t.Helper()
		var got time.Duration
		if err := runAction(t, balancerCommand(), func(c *cli.Context) error {
			got = seconds(c, "tombstone-retention")
			return nil
		}, args...); err != nil {
			t.Fatal(err)
		}
		return got
	}
	unsetenv(t, env)
	if got := retention(t); got != 3600*time.Second {
		t.Fatalf("without %s: %v, want 3600 s", env, got)
	}
	t.Setenv(env, "120")
	if got := retention(t); got != 120*time.Second {
		t.Fatalf("with %s=120: %v, want 120 s", env, got)
	}
	if got := retention(t, "--tombstone-retention", "90"); got != 90*time.Second {
		t.Fatalf("--tombstone-retention 90: %v, want 90 s (flags win over the environment)", got)
	}
}

// TestREADMEDocumentsSecretAndTombstoneDefaults: the operator reads these
// two defaults, and the variables that change them, in README.md's
// configuration tables; they say what the two tests above check.
func TestREADMEDocumentsSecretAndTombstoneDefaults(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		"| `SECRET` | `--secret` | `PURRNET` off Fly; **required on Fly** |",
		"| `ROOM_PUBLICATION_TOMBSTONE_RETENTION_SECONDS` | `--tombstone-retention` | `3600` | how long a released room publication stays fenced (non-positive: 3600) |",
	} {
		if !strings.Contains(string(b), row) {
			t.Errorf("README.md has no row containing %q", row)
		}
	}
}
