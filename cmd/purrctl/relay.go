package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/flyaffinity"
	"github.com/purrfly/purrfly/flyenv"
	"github.com/purrfly/purrfly/relay"
	"github.com/purrfly/purrfly/wire"
)

// shutdownMargin is what a stopping relay needs after its drain deadline:
// the draining heartbeat, close handshakes (up to 6 s) and the final
// unregister (one request timeout).
const shutdownMargin = 15 * time.Second

func relayCommand() *cli.Command {
	return &cli.Command{
		Name:  "relay",
		Usage: "run a relay (PurrLay): hosts and clients of rooms connect to it over WebSocket or UDP (LiteNetLib 2.x)",
		Flags: append([]cli.Flag{
			secretFlag(), debugFlag(),
			&cli.StringFlag{Name: "balancer", EnvVars: []string{"BALANCER_URL"}, Usage: "balancer base URL to register with (empty: standalone)"},
			&cli.StringFlag{Name: "host", EnvVars: []string{"HOST"}, Usage: "bind address (default 127.0.0.1, :: on Fly)"},
			&cli.IntFlag{Name: "port", EnvVars: []string{"PORT"}, Value: 8081, Usage: "HTTP port (/ping, internal API, and WebSocket upgrades at /)"},
			&cli.IntFlag{Name: "ws-port", EnvVars: []string{"WEBSOCKET_PORT"}, Value: 6942, Usage: "dedicated WebSocket port (-1 disables it)"},
			&cli.StringFlag{Name: "public-host", EnvVars: []string{"HOST_DOMAIN"}, Usage: "host clients connect to (default <app>.fly.dev on Fly, else 127.0.0.1)"},
			&cli.StringFlag{Name: "region", EnvVars: []string{"HOST_REGION"}, Usage: "region this relay serves (default FLY_REGION, else local)"},
			&cli.BoolFlag{Name: "ssl", EnvVars: []string{"HOST_SSL"}, Usage: "clients use wss/https (default true on Fly)"},
			&cli.StringFlag{Name: "endpoint", EnvVars: []string{"HOST_ENDPOINT"}, Usage: "API endpoint URL the balancer and clients reach"},
			&cli.IntFlag{Name: "endpoint-port", EnvVars: []string{"HOST_PORT"}, Usage: "port of the default API endpoint URL"},
			&cli.IntFlag{Name: "public-ws-port", EnvVars: []string{"HOST_WS_PORT"}, Usage: "WebSocket port advertised to clients (default 443 on Fly, else the listener's)"},
			&cli.IntFlag{Name: "udp-port", EnvVars: []string{"UDP_PORT"}, Value: 7777, Usage: "LiteNetLib 1.x UDP port, for PurrNet builds older than its move to 2.x (0: any free port, -1: not served, 7777 still advertised)"},
			&cli.IntFlag{Name: "udp-port-v2", EnvVars: []string{"UDP_PORT_V2"}, Value: 7778, Usage: "LiteNetLib 2.x UDP port (0: any free port, -1: not served; with --udp-port -1 too, no UDP)"},
			&cli.StringFlag{Name: "udp-host", EnvVars: []string{"UDP_HOST"}, Usage: "UDP bind address (default fly-global-services on Fly, else HOST; IPv4)"},
			&cli.IntFlag{Name: "public-udp-port-v2", EnvVars: []string{"HOST_UDP_PORT_V2"}, Usage: "UDP port advertised to clients (default the bound one)"},
			&cli.IntFlag{Name: "public-udp-port", EnvVars: []string{"HOST_UDP_PORT"}, Usage: "LiteNetLib 1.x UDP port advertised to clients (default the bound one)"},
			&cli.IntFlag{Name: "udp-sockets", EnvVars: []string{"UDP_SOCKETS"}, Value: 1, Usage: "UDP sockets sharing the port, each with its own reader (Linux)"},
			&cli.IntFlag{Name: "udp-timeout", EnvVars: []string{"UDP_TIMEOUT_SECONDS"}, Value: 10, Usage: "seconds of silence after which a UDP peer is dropped"},
			&cli.IntFlag{Name: "auth-timeout", EnvVars: []string{"AUTH_TIMEOUT_SECONDS"}, Value: 10, Usage: "seconds a connection (WebSocket or UDP) has to send its authentication"},
			&cli.IntFlag{Name: "ws-message-timeout", EnvVars: []string{"WEBSOCKET_MESSAGE_TIMEOUT_SECONDS"}, Value: 10, Usage: "seconds a WebSocket message may take from its first byte to its last"},
			&cli.IntFlag{Name: "max-rooms", EnvVars: []string{"MAX_ROOMS"}, Value: 10000, Usage: "rooms this relay holds at most (past it allocations go to other relays)"},
			&cli.StringFlag{Name: "labels", EnvVars: []string{"RELAY_LABELS"}, Usage: "placement labels, k=v,k2=v2 (at most 16; letters, digits, '.', '_', '-'); an allocation that asks for labels goes only to relays carrying them"},
			&cli.IntFlag{Name: "capacity-rooms", EnvVars: []string{"RELAY_MAX_ROOMS"}, Usage: "rooms this relay takes for placement (0: no limit beyond MAX_ROOMS); past it it is full"},
			&cli.IntFlag{Name: "capacity-connections", EnvVars: []string{"RELAY_MAX_CONNECTIONS"}, Usage: "connections past which this relay takes no new room (0: no limit); its rooms still take players"},
			&cli.IntFlag{Name: "max-pending", EnvVars: []string{"MAX_PENDING_CONNECTIONS"}, Value: 4096, Usage: "WebSocket connections waiting to authenticate, in all"},
			&cli.IntFlag{Name: "max-pending-per-source", EnvVars: []string{"MAX_PENDING_PER_SOURCE"}, Value: 64, Usage: "WebSocket connections waiting to authenticate, per source address"},
			&cli.IntFlag{Name: "udp-hold", EnvVars: []string{"UDP_HOLD_US"}, Value: 0, Usage: "microseconds a busy UDP peer (woken more often than that on average) waits for company under the busy rule (0: 1000; -1: no peer waits, a read batch's frames always leave at its end; at most 15000; ignored with --udp-flush)"},
			&cli.IntFlag{Name: "udp-flush", EnvVars: []string{"UDP_FLUSH_MS"}, Value: 0, Usage: "milliseconds every UDP peer's frames wait to leave merged in one datagram, for the most merging (0: the busy rule: a read batch's frames leave at its end, only a peer busier than one every millisecond waits up to 1 ms, see --udp-hold)"},
			&cli.IntFlag{Name: "heartbeat", EnvVars: []string{"HEARTBEAT_SECONDS"}, Value: 30, Usage: "seconds between registrations with the balancer"},
			&cli.IntFlag{Name: "host-connect-timeout", EnvVars: []string{"HOST_CONNECT_TIMEOUT_SECONDS"}, Value: 60, Usage: "seconds a room waits for its allocation's host to connect before it is released"},
			&cli.IntFlag{Name: "empty-room-timeout", EnvVars: []string{"EMPTY_ROOM_TIMEOUT_SECONDS"}, Value: 300, Usage: "seconds an empty room lives"},
			&cli.IntFlag{Name: "drain-timeout", EnvVars: []string{"DRAIN_TIMEOUT_SECONDS"}, Value: 25, Usage: "seconds a stopping relay waits for rooms to empty"},
			&cli.StringFlag{Name: "affinity", EnvVars: []string{"AFFINITY"}, Value: "auto", Usage: "session affinity across the app's machines: auto (on when FLY_MACHINE_ID is set), on, off"},
			&cli.StringFlag{Name: "machine-endpoint", EnvVars: []string{"MACHINE_ENDPOINT"}, Value: "auto", Usage: "this machine's own endpoint for a multi-machine app: auto (http://[FLY_PRIVATE_IP]:PORT when affinity is on), off (register the public endpoint, single machine), or an http(s) URL"},
		}, append(migrationFlags(), httpLimitFlags()...)...),
		Action: runRelay,
	}
}

func runRelay(c *cli.Context) error {
	secret, err := sharedSecret(c)
	if err != nil {
		return err
	}
	opts, err := relayOptions(c)
	if err != nil {
		return err
	}
	opts.Secret = secret
	log := newLogger(c)
	opts.Logger = log
	aff, err := affinity(c, opts, log)
	if err != nil {
		return err
	}
	if aff != nil {
		defer aff.Close()
		opts.Router = aff.Route
	}
	if err := multiMachine(c, &opts, aff != nil); err != nil {
		return err
	}
	srv, err := relay.New(opts)
	if err != nil {
		return usagef("invalid relay configuration: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("failed to start the relay: %w", err)
	}
	log.Info("relay started", "http", srv.HTTPURL(), "ws", srv.WSURL(), "udp", srv.UDPAddr(), "boot", srv.BootID(),
		"region", opts.Region, "balancer", opts.BalancerURL, "affinity", aff != nil,
		"multiMachine", opts.MultiMachine, "endpoint", opts.Endpoint, "publicEndpoint", opts.PublicEndpoint)
	select {
	case <-c.Context.Done():
	case <-srv.Retired():
		// Retired by a deploy: its last game ended (or its retire deadline
		// closed what was left). Exit 0, which Fly's on-failure restart
		// policy leaves stopped.
		if overdue, left := srv.RetireStats(); overdue {
			log.Warn("relay retired at its deadline", "closedRooms", left.Rooms, "closedConnections", left.Connections)
		}
	}
	log.Info("relay draining", "deadline", opts.DrainTimeout)
	// Shutdown = drain deadline + closing handshakes + the final unregister;
	// fly/relay.toml's kill_timeout (45 s) leaves room for all of it.
	ctx, cancel := context.WithTimeout(context.Background(), opts.DrainTimeout+shutdownMargin)
	defer cancel()
	return srv.Shutdown(ctx)
}

// relayOptions maps flags and env (the original PurrLay names) to options.
func relayOptions(c *cli.Context) (relay.Options, error) {
	balancerURL, err := httpURL(c, "balancer", true)
	if err != nil {
		return relay.Options{}, err
	}
	o := relay.Options{
		BalancerURL:         balancerURL,
		ListenHost:          c.String("host"),
		HTTPPort:            c.Int("port"),
		WSPort:              c.Int("ws-port"),
		PublicHost:          c.String("public-host"),
		Region:              c.String("region"),
		SSL:                 c.Bool("ssl"),
		Endpoint:            c.String("endpoint"),
		PublicWSPort:        c.Int("public-ws-port"),
		UDPPort:             c.Int("udp-port"),
		UDPPortV2:           c.Int("udp-port-v2"),
		UDPHost:             c.String("udp-host"),
		PublicUDPPortV2:     c.Int("public-udp-port-v2"),
		PublicUDPPort:       c.Int("public-udp-port"),
		UDPSockets:          c.Int("udp-sockets"),
		UDPTimeout:          seconds(c, "udp-timeout"),
		AuthTimeout:         seconds(c, "auth-timeout"),
		MessageTimeout:      seconds(c, "ws-message-timeout"),
		MaxRooms:            c.Int("max-rooms"),
		MaxPending:          c.Int("max-pending"),
		MaxPendingPerSource: c.Int("max-pending-per-source"),
		ClientIPHeader:      clientIPHeader(),
		HTTP:                httpLimits(c),
		ActivationLease:     seconds(c, "migration-activation-timeout"),
		GrantLifetime:       seconds(c, "migration-grant-timeout"),
		UDPFlush:            udpFlush(c.Int("udp-flush")),
		UDPHold:             udpHold(c.Int("udp-hold")),
		HeartbeatInterval:   seconds(c, "heartbeat"),
		EmptyRoomTimeout:    seconds(c, "empty-room-timeout"),
		HostConnectTimeout:  seconds(c, "host-connect-timeout"),
		DrainTimeout:        seconds(c, "drain-timeout"),
		MachineID:           flyEnv().MachineID,
		ImageRef:            flyEnv().ImageRef,
		Version:             version(),
	}
	if o.Labels, o.Capacity, err = placementOptions(c); err != nil {
		return o, err
	}
	if o.ListenHost == "" {
		o.ListenHost = defaultListenHost()
	}
	env := flyEnv()
	fly := env.OnFly()
	if o.PublicHost == "" {
		o.PublicHost = "127.0.0.1"
		if fly {
			o.PublicHost = env.PublicHost()
		}
	}
	if o.Region == "" {
		o.Region = env.Region
	}
	if o.Region == "" {
		o.Region = "local"
	}
	// An empty HOST_SSL counts as unset (as in the original services), so
	// it cannot turn wss off on Fly by accident.
	if fly && (!c.IsSet("ssl") || envEmpty("HOST_SSL") && !o.SSL) {
		o.SSL = true
	}
	if fly && o.PublicWSPort == 0 {
		o.PublicWSPort = 443
	}
	// The original services' rule: with HOST_DOMAIN (or HOST_PORT) given,
	// the endpoint is http(s)://HOST_DOMAIN[:HOST_PORT]; with neither, the
	// relay's own listener address.
	if o.Endpoint == "" && (c.IsSet("endpoint-port") || c.IsSet("public-host") || fly) {
		scheme := "http"
		if o.SSL {
			scheme = "https"
		}
		host := o.PublicHost
		if p := c.Int("endpoint-port"); p > 0 {
			host += ":" + strconv.Itoa(p)
		}
		o.Endpoint = scheme + "://" + host
	}
	if o.Endpoint != "" {
		if _, ok := wire.ParseHTTPURL(o.Endpoint); !ok {
			return o, usagef("HOST_ENDPOINT must be an http(s) URL")
		}
	}
	// Ports, UDP_SOCKETS and the other numbers are checked against their
	// ranges as the flags are read (ranges.go).
	if fly && o.UDPHost == "" && (o.UDPPortV2 >= 0 || o.UDPPort >= 0) {
		o.UDPHost = flyGlobalServices()
	}
	return o, nil
}

// flyGlobalServices is the IPv4 address of fly-global-services, the only
// address a Fly machine may answer UDP from (Fly routes the replies of
// that one back through its edge). Without it the relay binds 0.0.0.0,
// whose UDP replies Fly does not route; that is logged loudly.
func flyGlobalServices() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addr, err := flyenv.GlobalServicesAddr(ctx, net.DefaultResolver)
	if err != nil {
		slog.Warn(flyenv.GlobalServices+" does not resolve: UDP binds 0.0.0.0 and its replies will not reach clients through Fly", "err", err)
		return ""
	}
	return addr
}

// affinity builds the session-affinity router: on Fly (FLY_MACHINE_ID set)
// every connection of a room is pinned to one machine of the app by
// rendezvous hashing over the app's internal DNS; off Fly it is off. The
// resolver is FLY_DNS_SERVER when set (flysim), else Fly's fdaa::3.
func affinity(c *cli.Context, opts relay.Options, log *slog.Logger) (*flyaffinity.Resolver, error) {
	mode := c.String("affinity")
	switch mode {
	case "off":
		return nil, nil
	case "auto":
		if opts.MachineID == "" {
			return nil, nil
		}
	case "on":
		if opts.MachineID == "" || !flyEnv().OnFly() {
			return nil, usagef("AFFINITY=on needs FLY_APP_NAME and FLY_MACHINE_ID")
		}
	default:
		return nil, usagef("AFFINITY must be auto, on or off")
	}
	return flyaffinity.NewWithConfig(flyaffinity.Config{
		App:       flyEnv().AppName,
		Self:      opts.MachineID,
		TTL:       flyaffinity.DefaultTTL,
		DNSServer: flyEnv().DNSServer,
		PeerPort:  opts.HTTPPort,
		Logger:    log.With("component", "flyaffinity"),
	}), nil
}

// multiMachine makes the relay one machine of a multi-machine app: it
// registers with the balancer under its own endpoint (its 6PN address on
// Fly, which the balancer reaches directly; FLY_PRIVATE_IP is its
// 127.0.0.x address under flysim) while advertising the app's public
// endpoint, and hands requests and connections for rooms other machines
// hold to them (relay.Options.MultiMachine). MACHINE_ENDPOINT=auto does
// this whenever affinity is on and the balancer is set; off keeps the
// single-machine registration; a URL sets the endpoint explicitly.
func multiMachine(c *cli.Context, opts *relay.Options, affinityOn bool) error {
	mode := c.String("machine-endpoint")
	var endpoint string
	switch mode {
	case "off":
		return nil
	case "auto":
		if !affinityOn || opts.BalancerURL == "" || opts.HTTPPort == 0 {
			return nil
		}
		ip, ok, err := flyEnv().PrivateAddr()
		if err != nil {
			return usagef("%v", err)
		}
		if !ok {
			return nil
		}
		endpoint = "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(opts.HTTPPort))
	default:
		_, ok := wire.ParseHTTPURL(mode)
		if !ok {
			return usagef("MACHINE_ENDPOINT must be auto, off or an http(s) URL")
		}
		if opts.BalancerURL == "" {
			return usagef("MACHINE_ENDPOINT needs BALANCER_URL")
		}
		endpoint = strings.TrimRight(mode, "/")
	}
	opts.PublicEndpoint = opts.Endpoint
	opts.Endpoint = endpoint
	opts.MultiMachine = true
	// On Fly, players reach a machine only once the proxy routes to it:
	// until then it takes no room (relay.Options.ReachableURL).
	if opts.MachineID != "" && opts.PublicEndpoint != "" {
		opts.ReachableURL = opts.PublicEndpoint
	}
	return nil
}

// udpFlush is --udp-flush as relay.Options.UDPFlush: 0 (or less) is the
// busy rule.
func udpFlush(ms int) time.Duration {
	return time.Duration(max(ms, 0)) * time.Millisecond
}

// udpHold is --udp-hold as relay.Options.UDPHold: negative holds no peer,
// 0 is the relay's default.
func udpHold(us int) time.Duration {
	if us < 0 {
		return -1
	}
	return time.Duration(us) * time.Microsecond
}

// placementOptions reads RELAY_LABELS, RELAY_MAX_ROOMS and
// RELAY_MAX_CONNECTIONS; a mistake is a usage error naming the variable.
func placementOptions(c *cli.Context) (map[string]string, wire.Capacity, error) {
	labels, err := wire.ParseLabels(c.String("labels"))
	if err != nil {
		return nil, wire.Capacity{}, usagef("RELAY_LABELS: %s", strings.TrimPrefix(err.Error(), "labels: "))
	}
	capacity := wire.Capacity{MaxRooms: c.Int("capacity-rooms"), MaxConnections: c.Int("capacity-connections")}
	if capacity.MaxRooms < 0 {
		return nil, capacity, usagef("RELAY_MAX_ROOMS must be 0 (no limit) or a positive number of rooms")
	}
	if capacity.MaxConnections < 0 {
		return nil, capacity, usagef("RELAY_MAX_CONNECTIONS must be 0 (no limit) or a positive number of connections")
	}
	return labels, capacity, nil
}
