package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/relay"
)

// Every numeric flag's range is enforced as its help states, so a value
// the command cannot honour is a usage mistake (exit 2) and never silently
// replaced by a default. The rule for every int, duration and float flag
// is "not negative"; flagRanges lists the flags whose help says otherwise,
// by command path and flag name. A flag's range is checked whether its
// value came from the command line or from its environment variable
// (urfave/cli runs a flag's Action in both cases).

// numRange is a flag's accepted interval; max 0 means no upper bound; the
// zero numRange is "not negative".
type numRange struct {
	min, max int64
	why      string // the help's words, repeated in the mistake's message
}

// portRange is a TCP or UDP port, where 0 means any free one.
var portRange = numRange{min: 0, max: 65535, why: "a port number (0: any free port)"}

// portBaseRange is an emulator's port base: 0 keeps the config's own
// (1 to 1023 are refused where the base is applied).
var portBaseRange = numRange{min: 0, max: 65535 - 1100, why: "0 (the config's own) or a port base from 1024 to 64435"}

// flagRanges are the exceptions to "not negative", keyed "command flag"
// ("relay ws-port"); a key "* flag" applies to that flag name in every
// command.
var flagRanges = map[string]numRange{
	"* port":                         portRange,
	"* endpoint-port":                portRange,
	"* public-ws-port":               portRange,
	"* public-udp-port-v2":           portRange,
	"relay ws-port":                  {min: -1, max: 65535, why: "a port number (-1 disables the dedicated WebSocket port)"},
	"relay udp-port":                 {min: -1, max: 65535, why: "a port number (0: any free port, -1: LiteNetLib 1.x not served)"},
	"relay udp-port-v2":              {min: -1, max: 65535, why: "a port number (0: any free port, -1: LiteNetLib 2.x not served)"},
	"dev udp-port":                   {min: 0, max: 65535 - 16, why: "a port number (0: any free ports)"},
	"relay udp-sockets":              {min: 1, max: 64, why: "1 to 64 sockets"},
	"relay udp-hold":                 {min: -1, max: int64(relay.MaxUDPHold / time.Microsecond), why: "-1 (no peer waits), 0 (the default, 1 ms) or up to 15,000 microseconds"},
	"relay heartbeat":                {min: 1, why: "at least 1 second"},
	"relay auth-timeout":             {min: 1, why: "at least 1 second"},
	"relay udp-timeout":              {min: 1, why: "at least 1 second"},
	"balancer health-interval":       {min: 1, why: "at least 1 second"},
	"balancer max-tombstones":        {min: 1, why: "at least 1"},
	"chaos rooms":                    {min: 1, max: 64, why: "1 to 64 rooms"},
	"chaos players":                  {min: 1, max: 8, why: "1 to 8 players"},
	"chaos duration":                 {min: int64(chaosMinDuration), why: "at least " + chaosMinDuration.String() + ": the storm runs every fault kind once"},
	"* port-base":                    portBaseRange,
	"* sim-port-base":                portBaseRange,
	"bench repeat":                   {min: 1, why: "at least 1"},
	"bench rounds":                   {min: 1, why: "at least 1"},
	"bench size":                     {min: 12, max: 65535, why: "12 to 65,535 bytes (sender and timestamp first)"},
	"relay capacity-rooms":           {min: 0, why: "0 (no limit) or a positive number"},
	"relay capacity-connections":     {min: 0, why: "0 (no limit) or a positive number"},
	"* migration-grant-timeout":      {min: 1, why: "at least 1 second"},
	"* migration-activation-timeout": {min: 1, why: "at least 1 second"},
	// The product's rule: a non-positive horizon falls back to 3600 s.
	"balancer tombstone-retention": {min: math.MinInt64, why: "a number of seconds"},
}

// enforceRanges gives every numeric flag of cmd (path: "relay", "fleet
// rooms") that has no Action of its own one that checks its range.
func enforceRanges(cmd *cli.Command, path string) {
	short := strings.TrimPrefix(path, "purrctl ")
	for _, f := range cmd.Flags {
		switch f := f.(type) {
		case *cli.IntFlag:
			if f.Action == nil {
				r := rangeOf(short, f.Name)
				f.Action = func(_ *cli.Context, v int) error { return r.check(f.Name, f.EnvVars, int64(v), fmt.Sprint(v)) }
			}
		case *cli.Int64Flag:
			if f.Action == nil {
				r := rangeOf(short, f.Name)
				f.Action = func(_ *cli.Context, v int64) error { return r.check(f.Name, f.EnvVars, v, fmt.Sprint(v)) }
			}
		case *cli.DurationFlag:
			if f.Action == nil {
				r := rangeOf(short, f.Name)
				f.Action = func(_ *cli.Context, v time.Duration) error {
					return r.check(f.Name, f.EnvVars, int64(v), v.String())
				}
			}
		case *cli.Float64Flag:
			if f.Action == nil {
				r := rangeOf(short, f.Name)
				f.Action = func(_ *cli.Context, v float64) error {
					if v < 0 || v != v {
						return r.fail(f.Name, f.EnvVars, fmt.Sprint(v))
					}
					return nil
				}
			}
		}
	}
}

func rangeOf(path, name string) numRange {
	if r, ok := flagRanges[path+" "+name]; ok {
		return r
	}
	if r, ok := flagRanges["* "+name]; ok {
		return r
	}
	return numRange{}
}

func (r numRange) check(name string, env []string, v int64, shown string) error {
	if v < r.min || r.max > 0 && v > r.max {
		return r.fail(name, env, shown)
	}
	return nil
}

func (r numRange) fail(name string, env []string, shown string) error {
	src := "--" + name
	if len(env) > 0 {
		src += " (" + env[0] + ")"
	}
	if r.why == "" {
		return usagef("%s must not be negative, got %s", src, shown)
	}
	return usagef("%s must be %s, got %s", src, r.why, shown)
}
