package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/relay"
)

// IsServerChild reports whether this process was started as a server child
// (ServerEnv is set).
func IsServerChild() bool { return os.Getenv(ServerEnv) != "" }

// ServeChild runs the server a parent asked for through ServerEnv: it
// listens on 127.0.0.1, prints one ready line (JSON {"url","pid"}) on
// stdout, and serves until ctx ends or stdin reaches EOF (the parent
// closed it or died). The hidden `purrctl bench server` command and the
// package's tests call it.
func ServeChild(ctx context.Context, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	var cfg ServerConfig
	if err := json.Unmarshal([]byte(os.Getenv(ServerEnv)), &cfg); err != nil {
		return fmt.Errorf("failed to read %s: %w", ServerEnv, err)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The parent holds our stdin open for as long as it wants us.
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	switch cfg.Kind {
	case KindRelay:
		return serveRelay(ctx, cfg, stdout, log)
	case KindEcho:
		return serveEcho(ctx, stdout, log)
	case KindUDPEcho:
		return serveUDPEcho(ctx, stdout, log)
	case KindBalancer:
		return serveBalancer(ctx, cfg, stdout, log)
	case KindBalancerFloor:
		return serveBalancerFloor(ctx, cfg, stdout, log)
	}
	return fmt.Errorf("unknown server kind %q", cfg.Kind)
}

// startCPUProfile profiles this process into path until the returned
// function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("failed to create the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("failed to start the CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func printReady(w io.Writer, url string) error {
	return printReadyLine(w, ready{URL: url})
}

func printReadyLine(w io.Writer, r ready) error {
	r.PID = os.Getpid()
	b, _ := json.Marshal(r)
	if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
		return fmt.Errorf("failed to tell the parent we are ready: %w", err)
	}
	return nil
}

func serveRelay(ctx context.Context, cfg ServerConfig, stdout io.Writer, log *slog.Logger) error {
	if cfg.BalancerURL == "" {
		return errors.New("a relay child needs a balancer URL")
	}
	o := relay.Options{
		Secret:      cfg.Secret,
		BalancerURL: cfg.BalancerURL,
		ListenHost:  "127.0.0.1",
		PublicHost:  "127.0.0.1",
		// LiteNetLib 2.x and 1.x on ephemeral ports of loopback,
		// advertised as the allocations' and joins' udpPortV2 and udpPort.
		UDPHost:   "127.0.0.1",
		UDPPortV2: 0,
		UDPPort:   0,
		Region:    cfg.Region,
		Version:   "bench",
		Logger:    log,
		// Every load connection comes from loopback: the per-source bound
		// on connections waiting to authenticate is the total's.
		MaxPendingPerSource: relay.DefaultMaxPending,
		// A machine of a multi-machine app registers under its own HTTP
		// URL (the relay derives http://127.0.0.1:<port> from ListenHost)
		// and advertises the app's public endpoint.
		MultiMachine:   cfg.MultiMachine,
		PublicEndpoint: cfg.PublicEndpoint,
	}
	o.MaxRooms = cfg.MaxRooms
	o.UDPFlush = time.Duration(max(cfg.UDPFlushMS, 0)) * time.Millisecond
	o.HeartbeatInterval = time.Duration(cfg.HeartbeatSec) * time.Second
	if cfg.SoakTimeoutMS > 0 {
		// The soak spreads its connections over many source addresses
		// and checks the relay's own bounds. Rooms left vacant by their
		// host (kept for host migration) expire as soon, so that a round
		// ends with none.
		o.MaxPendingPerSource = 0
		o.AuthTimeout = time.Duration(cfg.SoakTimeoutMS) * time.Millisecond
		o.HTTP.Header = o.AuthTimeout
		o.EmptyRoomTimeout = o.AuthTimeout
	}
	srv, err := relay.New(o)
	if err != nil {
		return fmt.Errorf("failed to configure the relay: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("failed to start the relay: %w", err)
	}
	defer srv.Close()
	if err := printReadyLine(stdout, ready{URL: srv.WSURL(), HTTPURL: srv.HTTPURL(), UDPAddr: srv.UDPAddr(), UDP1Addr: srv.UDP1Addr()}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func serveBalancer(ctx context.Context, cfg ServerConfig, stdout io.Writer, log *slog.Logger) error {
	srv, err := balancer.New(balancer.Options{
		Secret: cfg.Secret, ListenHost: "127.0.0.1", Region: cfg.Region, Version: "bench", Logger: log,
		AllocateRate: unlimited, JoinRate: unlimited, MaxRoomsPerSource: -1, AdminKeys: balancer.ParseAdminKeys(cfg.AdminKey),
	})
	if err != nil {
		return fmt.Errorf("failed to configure the balancer: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("failed to start the balancer: %w", err)
	}
	defer srv.Close()
	if err := printReady(stdout, srv.URL()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
