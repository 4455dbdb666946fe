package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/wire"
)

// The CLI contract (README "Exit codes"): every usage mistake (an unknown
// command or flag, a bad flag value, an argument a command does not take,
// a bad URL) ends with exit 2 and one line naming the mistake and where
// to look, never a help dump. urfave/cli's own defaults differ (exit 3
// and a help dump for an unknown command, the whole help after a bad
// flag, extra arguments ignored), so enforce sets them once for the whole
// command tree.

// enforce applies the contract to app and every command under it.
func enforce(app *cli.App) {
	// Our help command replaces urfave/cli's, whose presence would also
	// have added the --help flag: added here.
	app.HideHelpCommand = true
	app.Commands = append(app.Commands, helpCommand())
	app.Flags = append(app.Flags, cli.HelpFlag)
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return usagef("%v (run 'purrctl --help')", err)
	}
	app.Action = func(c *cli.Context) error {
		if c.Args().Present() {
			return unknownCommand(c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	for _, cmd := range app.Commands {
		enforceCommand(cmd, "purrctl "+cmd.Name)
	}
}

func enforceCommand(cmd *cli.Command, path string) {
	enforceRanges(cmd, path)
	cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return usagef("%v (run '%s --help')", err, path)
	}
	if action := cmd.Action; action != nil && cmd.ArgsUsage == "" && !cmd.SkipFlagParsing {
		cmd.Action = func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("%s takes no arguments, got %q (run '%s --help')", path, c.Args().First(), path)
			}
			return action(c)
		}
	}
	for _, sub := range cmd.Subcommands {
		enforceCommand(sub, path+" "+sub.Name)
	}
}

func unknownCommand(name string) error {
	return usagef("unknown command %q (run 'purrctl help' for the list)", name)
}

// helpCommand replaces urfave/cli's, which exits 3 on an unknown topic.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show the commands, or one command's flags",
		ArgsUsage: "[COMMAND]",
		Action: func(c *cli.Context) error {
			switch c.NArg() {
			case 0:
				return cli.ShowAppHelp(c)
			case 1:
				name := c.Args().First()
				if c.App.Command(name) == nil {
					return unknownCommand(name)
				}
				// What `purrctl NAME --help` prints (rollout's flags live in
				// its own inner app).
				return c.App.RunContext(c.Context, []string{c.App.Name, name, "--help"})
			}
			return usagef("help takes at most one command name")
		},
	}
}

// httpURL checks a flag's value is an absolute http(s) URL with a host
// (empty passes when the flag is optional).
func httpURL(c *cli.Context, flag string, optional bool) (string, error) {
	v := c.String(flag)
	if v == "" && optional {
		return "", nil
	}
	u, ok := wire.ParseHTTPURL(v)
	// A base URL: the commands append their own paths, so a path, query or
	// fragment given here would be silently dropped or mangled.
	if ok && (u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery) {
		return "", usagef("--%s (or its environment variable) must be a base URL, http(s)://host[:port] with no path, query or fragment, got %q", flag, u.Redacted())
	}
	if !ok || u.User != nil {
		shown := "an unparsable value" // it may hold a credential: never echoed whole
		if u != nil {
			shown = fmt.Sprintf("%q", u.Redacted())
		}
		return "", usagef("--%s (or its environment variable) must be an http(s) URL without credentials, such as http://127.0.0.1:8080, got %s", flag, shown)
	}
	return v, nil
}

// versionCommand prints what build info says this binary is.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the module version, VCS revision and Go version of this binary",
		Action: func(c *cli.Context) error {
			_, err := fmt.Fprintln(c.App.Writer, "purrctl", describeBuild())
			return err
		},
	}
}
