package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/bench"
	"github.com/purrfly/purrfly/client"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "load a relay with rooms of PurrNet clients and compare it with a plain WebSocket (or UDP) echo server",
		Description: "Starts a balancer in this process and the relay (and, with --baseline, the echo server) as\n" +
			"child processes of this binary on loopback, so their CPU time and memory are measured alone.\n" +
			"Closed loop by default (--window messages in flight per client); --rate switches to open loop.\n" +
			"--forwarded measures a multi-machine relay app instead: two relay children, rooms on the first,\n" +
			"hosts on the first and clients (no session hint, as PurrNet connects) on the second, which\n" +
			"forwards them to the first; with --baseline the same shape also runs direct (clients on the\n" +
			"first) and the ratios read forwarded/direct. CPU and memory are both relays' sums.\n" +
			"--transport udp loads the relay over LiteNetLib (--delivery picks the method) and compares it\n" +
			"with a plain UDP echo server (one read, one write per datagram) loaded by plain UDP sockets.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "rooms", Value: bench.DefaultRooms, Usage: "rooms"},
			&cli.IntFlag{Name: "clients", Value: bench.DefaultClients, Usage: "clients per room (each room also has a host)"},
			&cli.IntFlag{Name: "size", Value: bench.DefaultSize, Usage: "payload bytes per message (at least 12: sender and timestamp)"},
			&cli.Float64Flag{Name: "rate", Usage: "messages per second per client and direction (0: closed loop)"},
			&cli.IntFlag{Name: "window", Value: bench.DefaultWindow, Usage: "closed loop: messages in flight per client and direction"},
			&cli.DurationFlag{Name: "duration", Value: bench.DefaultDuration, Usage: "measured window (idle mode: how long the connections are held)"},
			&cli.DurationFlag{Name: "warmup", Value: bench.DefaultWarmup, Usage: "traffic before the measured window"},
			&cli.StringFlag{Name: "mode", Value: string(bench.FanIn), Usage: "fan-in (clients to host), fan-out (host to clients) or both"},
			&cli.StringFlag{Name: "transport", Value: "ws", Usage: "ws (WebSocket, PurrNet's WebGL builds), udp (LiteNetLib 2.x: desktop, mobile, Editor) or udp1 (LiteNetLib 1.x: builds before PurrNet's move to 2.x)"},
			&cli.StringFlag{Name: "delivery", Usage: "with --transport udp: ro (ReliableOrdered), ru (ReliableUnordered), seq (Sequenced), rs (ReliableSequenced) or unrel (Unreliable, the default)"},
			&cli.IntFlag{Name: "server-procs", Usage: "GOMAXPROCS of the relay and baseline processes (0: all cores; 1: as on a Fly shared-cpu-1x machine)"},
			&cli.DurationFlag{Name: "relay-flush", Usage: "with --transport udp: the relay child's UDP_FLUSH_MS, a fixed wait for every peer's datagrams (whole milliseconds; 0: the relay's default, the busy rule)"},
			&cli.DurationFlag{Name: "peer-flush", Value: bench.DefaultPeerFlush, Usage: "with --transport udp: how long a load peer's sends wait to leave merged, as PurrNet's client sends once per tick (0: at once)"},
			&cli.BoolFlag{Name: "baseline", Usage: "also run the same load against a coder/websocket echo server (--transport udp: a plain UDP echo) and print relay/baseline ratios (with --forwarded: the same shape direct, ratios forwarded/direct)"},
			&cli.IntFlag{Name: "repeat", Value: 1, Usage: "run relay and baseline this many times, alternating, and report medians"},
			&cli.BoolFlag{Name: "baseline-only", Usage: "run only the echo baseline"},
			&cli.BoolFlag{Name: "forwarded", Usage: "forwarding mode: clients reach their room through a second relay of a multi-machine app (with --baseline: versus the same shape direct)"},
			&cli.IntFlag{Name: "idle", Usage: "idle mode: open this many authenticated connections (rooms of one host and --clients clients), no traffic, report RSS per connection"},
			&cli.IntFlag{Name: "soak", Usage: "connection soak: open this many connections a round (players, clients that never read, upgrades that never authenticate, silent and slowloris sockets), abandon them, and check the relay's goroutines and open files come back"},
			&cli.IntFlag{Name: "rounds", Value: bench.DefaultRounds, Usage: "with --soak: rounds"},
			&cli.DurationFlag{Name: "soak-timeout", Value: bench.DefaultSoakTimeout, Usage: "with --soak: the relay child's authentication and header timeouts"},
			&cli.IntFlag{Name: "balancer-load", Usage: "balancer mode: this many workers allocate and join fresh rooms back to back against a balancer child (relay child behind it); reports pairs/s and p99; with --baseline also against the floor, a minimal net/http server making the same relay call, and prints balancer/floor ratios"},
			&cli.BoolFlag{Name: "watch-events", Usage: "with --balancer-load: keep a GET /v1/events stream open on the balancer and read it during each run, as an operator's dashboard does"},
			&cli.StringFlag{Name: "cpu-profile", Usage: "write each server child's CPU profile to PREFIX-<kind>.pprof (balancer, relay, balancer-floor with --balancer-load; relay, echo or udp-echo in one traffic run)"},
			&cli.StringFlag{Name: "balancer", Usage: "existing balancer URL to allocate and join through (default: in-process balancer, relay child)"},
			&cli.StringFlag{Name: "region", Usage: "allocation region with --balancer"},
			&cli.IntFlag{Name: "server-pid", Usage: "with --balancer: pid of the relay process to measure (CPU, RSS)"},
			&cli.DurationFlag{Name: "setup-timeout", Value: bench.DefaultSetupTimeout, Usage: "bound on connecting everything"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
			debugFlag(),
		},
		Action: runBench,
		Subcommands: []*cli.Command{{
			Name:   "server",
			Hidden: true,
			Usage:  "internal: the server child of purrctl bench (configured by " + bench.ServerEnv + ")",
			Action: func(c *cli.Context) error {
				if !bench.IsServerChild() {
					return usagef("purrctl bench server is started by purrctl bench only")
				}
				return bench.ServeChild(c.Context, os.Stdin, os.Stdout, nil)
			},
		}},
	}
}

func runBench(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("unexpected argument %q", c.Args().First())
	}
	tr, ok := client.ParseTransport(c.String("transport"))
	if !ok {
		return usagef("--transport must be ws, udp or udp1")
	}
	balancerURL, err := httpURL(c, "balancer", true)
	if err != nil {
		return err
	}
	o := bench.Options{
		Transport: tr, Delivery: bench.Delivery(c.String("delivery")), PeerFlush: peerFlush(c.Duration("peer-flush")), ServerProcs: c.Int("server-procs"),
		RelayFlush: c.Duration("relay-flush"),
		Rooms:      c.Int("rooms"), Clients: c.Int("clients"), Size: c.Int("size"),
		Rate: c.Float64("rate"), Window: c.Int("window"),
		Duration: c.Duration("duration"), Warmup: c.Duration("warmup"),
		Mode:     bench.Mode(c.String("mode")),
		Baseline: c.Bool("baseline") || c.Bool("baseline-only"), SkipRelay: c.Bool("baseline-only"),
		Repeat:       c.Int("repeat"),
		Forwarded:    c.Bool("forwarded"),
		Idle:         c.Int("idle"),
		BalancerLoad: c.Int("balancer-load"),
		WatchEvents:  c.Bool("watch-events"),
		CPUProfile:   c.String("cpu-profile"),
		Soak:         c.Int("soak"), Rounds: c.Int("rounds"), SoakTimeout: c.Duration("soak-timeout"),
		BalancerURL: balancerURL, Region: c.String("region"), ServerPID: c.Int("server-pid"),
		SetupTimeout: c.Duration("setup-timeout"),
		Logger:       benchLogger(c),
	}
	res, err := bench.Run(c.Context, o)
	if errors.Is(err, bench.ErrInvalidOptions) {
		return usageError{err}
	}
	if c.Context.Err() != nil {
		// Stopped mid-run: the figures (and a soak's growth check) cover a
		// run cut short, so none is printed as if it were a result.
		return interrupted{"the benchmark stopped before its run ended; no figures were kept"}
	}
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.WriteText(w)
	if res.Soak != nil && !res.Soak.Clean() {
		return errors.New("the connection soak found growth, connections the relay did not close, or errors")
	}
	return nil
}

// benchLogger reports progress on stderr only with --debug, keeping the
// output clean.
func benchLogger(c *cli.Context) *slog.Logger {
	if !c.Bool("debug") {
		return slog.New(slog.DiscardHandler)
	}
	return newLogger(c)
}

// peerFlush is --peer-flush as bench.Options.PeerFlush: 0 means none.
func peerFlush(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
