package main

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestUsageMistakesExit2WithOneLine: every usage mistake exits 2 with one
// line on stderr that names it and where to look, prints nothing on
// stdout and never dumps the help.
func TestUsageMistakesExit2WithOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frob"}, `unknown command "frob" (run 'purrctl help'`},
		{[]string{"help", "frob"}, `unknown command "frob"`},
		{[]string{"help", "smoke", "relay"}, "at most one command"},
		{[]string{"--frob"}, "flag provided but not defined: -frob (run 'purrctl --help')"},
		{[]string{"smoke", "--frob"}, "flag provided but not defined: -frob (run 'purrctl smoke --help')"},
		{[]string{"smoke", "extra", "args"}, `purrctl smoke takes no arguments, got "extra"`},
		{[]string{"dev", "now"}, `purrctl dev takes no arguments, got "now"`},
		{[]string{"dev", "--host", "0.0.0.0"}, "--host must be one IP address of this machine"},
		{[]string{"dev", "--host", "my-laptop.local"}, "--host must be one IP address"},
		{[]string{"dev", "--secret", "with space"}, "--secret must be 1 to"},
		{[]string{"dev", "--regions", "eu,not a region"}, `--regions: "not a region" is not a region name`},
		{[]string{"version", "x"}, "takes no arguments"},
		{[]string{"relay", "--port", "abc"}, `invalid value "abc" for flag -port`},
		{[]string{"relay", "--labels", "tier"}, `RELAY_LABELS: entry 1 ("tier") is not key=value`},
		{[]string{"relay", "--labels", "tier=pro,tier=free"}, `RELAY_LABELS: key "tier" is given twice`},
		{[]string{"relay", "--labels", "tier=pro!"}, `RELAY_LABELS: entry 1 ("tier=pro!"): the value may hold only letters, digits`},
		{[]string{"relay", "--capacity-rooms", "-1"}, "--capacity-rooms (RELAY_MAX_ROOMS) must be 0 (no limit) or a positive number"},
		{[]string{"relay", "--capacity-connections", "-1"}, "--capacity-connections (RELAY_MAX_CONNECTIONS) must be 0 (no limit) or a positive number"},
		{[]string{"balancer", "--placement", "fullest"}, "BALANCER_PLACEMENT must be least, most or random"},
		{[]string{"smoke", "--balancer", "ftp://x"}, `--balancer (or its environment variable) must be an http(s) URL`},
		{[]string{"smoke", "--balancer", "127.0.0.1:8080"}, `--balancer (or its environment variable) must be an http(s) URL`},
		{[]string{"relay", "--balancer", "http://"}, `--balancer (or its environment variable) must be an http(s) URL`},
		{[]string{"bench", "--balancer", "http://u:hunter2@host"}, `--balancer (or its environment variable) must be an http(s) URL without credentials`},
		{[]string{"bench", "extra"}, `takes no arguments, got "extra"`},
		{[]string{"rollout"}, "exactly one environment"},
		{[]string{"rollout", "prod", "--frob"}, "flag provided but not defined: -frob (run 'purrctl rollout --help')"},
		{[]string{"rollout", "prod", "--image", "x", "--machines-api", "nope"}, "--machines-api (or its environment variable) must be an http(s) URL"},
		{[]string{"launch"}, "launch needs exactly one environment"},
		{[]string{"launch", "prod"}, "launch needs --image REF"},
		{[]string{"launch", "prod", "--rollback"}, "flag provided but not defined: -rollback (run 'purrctl launch --help')"},
		{[]string{"launch", "nowhere", "--image", "x", "--config", "../../fly/rollout.toml"}, `unknown environment "nowhere"`},
		{[]string{"sim", "--config", "../../fly/sim.toml", "--port-base", "70000"}, "--port-base (PURRFLY_SIM_PORT_BASE) must be 0 (the config's own) or a port base from 1024 to 64435, got 70000"},
		{[]string{"sim", "--config", "../../fly/sim.toml", "--port-base", "80"}, "--port-base (PURRFLY_SIM_PORT_BASE): port base 80 out of range (1024 to 64435)"},
		{[]string{"launch", "sim", "--image", "x", "--config", "../../fly/rollout.toml", "--sim-port-base", "80"}, "--sim-port-base (PURRFLY_SIM_PORT_BASE): port base 80 out of range"},
		// Ranges are enforced as the help states them.
		{[]string{"smoke", "--balancer", "http://127.0.0.1:8080/path"}, "must be a base URL, http(s)://host[:port] with no path"},
		{[]string{"fleet", "status", "--balancer", "http://127.0.0.1:8080/?x=1"}, "with no path, query or fragment"},
		{[]string{"fleet"}, "purrctl fleet needs a command: status, instances"},
		{[]string{"relay", "--heartbeat", "-5"}, "--heartbeat (HEARTBEAT_SECONDS) must be at least 1 second, got -5"},
		{[]string{"relay", "--udp-sockets", "0"}, "--udp-sockets (UDP_SOCKETS) must be 1 to 64 sockets, got 0"},
		{[]string{"relay", "--udp-hold", "15001"}, "--udp-hold (UDP_HOLD_US) must be -1 (no peer waits), 0 (the default, 1 ms) or up to 15,000 microseconds, got 15001"},
		{[]string{"relay", "--udp-hold", "-2"}, "--udp-hold (UDP_HOLD_US) must be -1 (no peer waits)"},
		{[]string{"relay", "--ws-port", "-2"}, "-1 disables the dedicated WebSocket port"},
		{[]string{"relay", "--port", "70000"}, "--port (PORT) must be a port number"},
		{[]string{"relay", "--udp-port", "-2"}, "--udp-port (UDP_PORT) must be a port number (0: any free port, -1: LiteNetLib 1.x not served), got -2"},
		{[]string{"balancer", "--join-rate", "-1"}, "--join-rate (JOIN_RATE_PER_MINUTE) must not be negative, got -1"},
		{[]string{"chaos", "--rooms", "100"}, "--rooms must be 1 to 64 rooms, got 100"},
		{[]string{"chaos", "--players", "20"}, "--players must be 1 to 8 players, got 20"},
		{[]string{"chaos", "--duration", "5s"}, "--duration must be at least 1m0s: the storm runs every fault kind once, got 5s"},
		{[]string{"bench", "--size", "4"}, "--size must be 12 to 65,535 bytes"},
		{[]string{"bench", "--rate", "-3"}, "--rate must not be negative, got -3"},
		{[]string{"dev", "--port", "-1"}, "--port must be a port number (0: any free port), got -1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"purrctl"}, tc.args...), &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "purrctl: ") || !strings.Contains(msg, tc.want) {
				t.Errorf("stderr %q, want one line with %q", msg, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing (no help dump)", stdout.String())
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("stderr shows a credential: %q", msg)
			}
		})
	}
}

// TestHelpAndVersionExit0: asking for help or the version is no mistake.
func TestHelpAndVersionExit0(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "COMMANDS:"},
		{[]string{"help"}, "COMMANDS:"},
		{[]string{"--help"}, "COMMANDS:"},
		{[]string{"help", "smoke"}, "purrctl smoke - allocate a room"},
		{[]string{"help", "rollout"}, "--image value"},
		{[]string{"help", "launch"}, "create ENV's fleet from its fly.tomls"},
		{[]string{"smoke", "--help"}, "purrctl smoke - allocate a room"},
		{[]string{"version"}, "purrctl dev (revision "},
		{[]string{"--version"}, "purrctl version "},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"purrctl"}, tc.args...), &stdout, &stderr); code != exitOK {
				t.Errorf("exit %d (stderr %q), want 0", code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.want) {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.want)
			}
		})
	}
	var stdout bytes.Buffer
	run([]string{"purrctl", "version"}, &stdout, &bytes.Buffer{})
	if !regexp.MustCompile(`^purrctl \S+ \(revision \S+, go1\.\d+`).MatchString(stdout.String()) {
		t.Errorf("version line %q, want module version, revision and Go version", stdout.String())
	}
}

// TestExitCodesMatchTheREADME: the README's exit code table lists exactly
// the codes purrctl returns.
func TestExitCodesMatchTheREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "Exit codes:\n")
	if !ok {
		t.Fatal(`README has no "Exit codes:" table`)
	}
	table, _, _ = strings.Cut(strings.TrimLeft(table, "\n"), "\n\n")
	var documented []int
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(table, -1) {
		n, _ := strconv.Atoi(m[1])
		documented = append(documented, n)
	}
	returned := []int{exitOK, exitFailure, exitUsage, exitRolledBack, exitInterrupted}
	slices.Sort(documented)
	if !slices.Equal(documented, returned) {
		t.Fatalf("README documents exit codes %v, purrctl returns %v", documented, returned)
	}
}

// TestRangesFromTheEnvironment: a range is enforced on a value from the
// environment as from the command line, and names the variable.
func TestRangesFromTheEnvironment(t *testing.T) {
	t.Setenv("HEARTBEAT_SECONDS", "-5")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"purrctl", "relay"}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "HEARTBEAT_SECONDS") {
		t.Fatalf("HEARTBEAT_SECONDS=-5 purrctl relay: exit %d, %q; want exit 2 naming the variable", code, stderr.String())
	}
}

// TestHelpPlaceholders: urfave/cli turns a flag usage's first backquoted
// text into the value's placeholder; every placeholder is one word in
// capitals (FILE, URL), never a phrase of the usage.
func TestHelpPlaceholders(t *testing.T) {
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				doc, ok := f.(cli.DocGenerationFlag)
				if !ok {
					continue
				}
				if _, rest, found := strings.Cut(doc.GetUsage(), "`"); found {
					ph, _, _ := strings.Cut(rest, "`")
					if !regexp.MustCompile(`^[A-Z][A-Z_]*$`).MatchString(ph) {
						t.Errorf("%s %s: placeholder %q, want one word in capitals", path+c.Name, f.Names()[0], ph)
					}
				}
			}
			walk(path+c.Name+" ", c.Subcommands)
		}
	}
	walk("", app.Commands)
}
