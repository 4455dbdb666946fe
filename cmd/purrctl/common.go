package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/flyenv"
	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/wire"
)

// buildVersion is set with -ldflags "-X main.buildVersion=..." by the Dockerfile.
var buildVersion = ""

// version is the short form (--version, logs): buildVersion, else the
// first 12 digits of the VCS revision, else "dev".
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if rev, _ := vcsRevision(); len(rev) >= 12 {
		return rev[:12]
	}
	return "dev"
}

// describeBuild is the long form (purrctl version): the short form, so that
// both name the binary alike, then the VCS revision (+modified when built
// from a dirty tree) and the Go version.
func describeBuild() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version() + " (no build info)"
	}
	rev, modified := vcsRevision()
	if rev == "" {
		rev = "unknown"
	}
	if modified {
		rev += "+modified"
	}
	return fmt.Sprintf("%s (revision %s, %s)", version(), rev, bi.GoVersion)
}

// vcsRevision is the build's VCS revision and whether the tree was dirty.
func vcsRevision() (rev string, modified bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, modified
}

// onFly reports whether this process runs on a Fly machine.
func onFly() bool { return flyEnv().OnFly() }

// flyEnv is what Fly tells this machine (package flyenv; empty off Fly).
func flyEnv() flyenv.Environment { return flyenv.Read(os.Getenv) }

// newLogger logs JSON on Fly (for its log shipping) and text on a terminal.
func newLogger(c *cli.Context) *slog.Logger {
	level := slog.LevelInfo
	if c.Bool("debug") {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if onFly() {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// sharedSecret resolves SECRET: explicit values must be printable ASCII
// without spaces; on Fly an explicit value is required, since the
// well-known default would let unrelated deployments talk to each other.
func sharedSecret(c *cli.Context) (string, error) {
	s := c.String("secret")
	explicit := c.IsSet("secret")
	if !explicit && onFly() {
		return "", usagef("SECRET must be set on Fly (fly secrets set SECRET=...); the default %q is for local use only", "PURRNET")
	}
	if !explicit {
		return "PURRNET", nil
	}
	if !wire.ValidSecretList(s) {
		return "", usagef("SECRET must be 1 to %d comma-separated values (the first is sent, any is accepted), each 1 to %d printable ASCII characters without spaces", wire.MaxSecrets, wire.MaxSecretLen)
	}
	return s, nil
}

func secretFlag() cli.Flag {
	return &cli.StringFlag{Name: "secret", EnvVars: []string{"SECRET"}, Usage: "shared relay/balancer secret, comma-separated to rotate: the first is sent, any accepted (default PURRNET off Fly; required on Fly)"}
}

func debugFlag() cli.Flag {
	return &cli.BoolFlag{Name: "debug", EnvVars: []string{"PURRFLY_DEBUG"}, Usage: "debug logging"}
}

// defaultListenHost binds every interface on Fly (the proxy and 6PN reach
// the machine over IPv6 and IPv4) and loopback elsewhere.
func defaultListenHost() string {
	if onFly() {
		return "::"
	}
	return "127.0.0.1"
}

func seconds(c *cli.Context, name string) time.Duration {
	return time.Duration(c.Int(name)) * time.Second
}

// envEmpty reports whether the variable is present but empty.
func envEmpty(name string) bool {
	v, ok := os.LookupEnv(name)
	return ok && v == ""
}

// migrationFlags are host migration's two settings, read by `purrctl
// relay` and by the relays `purrctl dev` starts.
func migrationFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "migration-activation-timeout", EnvVars: []string{"MIGRATION_HOST_ACTIVATION_TIMEOUT_SECONDS"}, Value: 60,
			Usage: "seconds a claimed host has to activate (must exceed PurrNet's transition timeout plus margin)"},
		&cli.IntFlag{Name: "migration-grant-timeout", EnvVars: []string{"MIGRATION_GRANT_TIMEOUT_SECONDS"}, Value: 30,
			Usage: "seconds a host's handoff grant lives"},
	}
}

// httpLimitFlags are the HTTP servers' waits (wire.HTTPLimits), for the
// relay and the balancer alike.
func httpLimitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "http-header-timeout", EnvVars: []string{"HTTP_HEADER_TIMEOUT_SECONDS"}, Value: 10, Usage: "seconds a request may take to send its request line and headers"},
		&cli.IntFlag{Name: "http-read-timeout", EnvVars: []string{"HTTP_READ_TIMEOUT_SECONDS"}, Value: 30, Usage: "seconds a whole request (body included) may take"},
		&cli.IntFlag{Name: "http-write-timeout", EnvVars: []string{"HTTP_WRITE_TIMEOUT_SECONDS"}, Value: 30, Usage: "seconds writing an answer may take"},
		&cli.IntFlag{Name: "http-idle-timeout", EnvVars: []string{"HTTP_IDLE_TIMEOUT_SECONDS"}, Value: 60, Usage: "seconds a kept-alive connection may wait for its next request"},
	}
}

// httpLimits reads httpLimitFlags.
func httpLimits(c *cli.Context) wire.HTTPLimits {
	return wire.HTTPLimits{Header: seconds(c, "http-header-timeout"), Read: seconds(c, "http-read-timeout"),
		Write: seconds(c, "http-write-timeout"), Idle: seconds(c, "http-idle-timeout")}
}

// perMinute is a per-source rate flag: n a minute with a burst of n/2; 0
// turns the limit off.
func perMinute(n int) limit.Rate {
	if n <= 0 {
		return limit.Rate{Every: -1}
	}
	return limit.PerMinute(n, max(n/2, 1))
}

// clientIPHeader is where a request's source address is read: behind
// Fly's proxy, Fly-Client-IP (the TCP peer is the proxy); elsewhere the
// TCP peer itself.
func clientIPHeader() string {
	if onFly() {
		return wire.HeaderFlyClientIP
	}
	return ""
}
