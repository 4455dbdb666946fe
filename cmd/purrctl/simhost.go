package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/flysim"
)

// simHostCommand fails or restores a host of a running `purrctl sim`
// (flysim's host_down and host_up faults).
func simHostCommand() *cli.Command {
	return &cli.Command{
		Name:      "host",
		Usage:     "fail (down) or bring back (up) an emulated host of a running sim: its machines vanish without a signal, their standbys start",
		ArgsUsage: "down|up",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state", Required: true, Usage: "the running sim's state file (purrctl sim --state)"},
			&cli.StringFlag{Name: "machine", Usage: "the host of this machine"},
			&cli.StringFlag{Name: "host", Usage: "the host by name (<region>-<n>)"},
		},
		Action: func(c *cli.Context) error {
			kind := map[string]string{"down": flysim.NetHostDown, "up": flysim.NetHostUp}[c.Args().First()]
			if kind == "" || c.NArg() != 1 || (c.String("machine") == "") == (c.String("host") == "") {
				return usagef("usage: purrctl sim host down|up --state FILE (--machine ID | --host NAME)")
			}
			b, err := os.ReadFile(c.String("state"))
			if err != nil {
				return usagef("read state: %w", err)
			}
			var st flysim.State
			if err := json.Unmarshal(b, &st); err != nil {
				return usagef("state %s: %w", c.String("state"), err)
			}
			hc := &http.Client{Timeout: 30 * time.Second}
			res, err := flysim.PostHostFault(c.Context, hc, st, flysim.NetFault{Kind: kind, Host: c.String("host"), Machine: c.String("machine")})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "host %s %s: machines %s\n", res.Host, c.Args().First(), strings.Join(res.Machines, ", "))
			return nil
		},
	}
}
