package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// ServerEnv carries a server child's configuration (JSON ServerConfig).
// Its presence is what tells a re-executed binary to be a server.
const ServerEnv = "PURRFLY_BENCH_SERVER"

// Server kinds a child runs.
const (
	KindRelay = "relay" // a purrfly relay registering with BalancerURL
	KindEcho  = "echo"  // the coder/websocket echo baseline
	// KindUDPEcho is the UDP runs' baseline: one read and one write per
	// datagram (udpecho.go); its ready URL is udp://127.0.0.1:port.
	KindUDPEcho = "udp-echo"
	// KindBalancer is a purrfly balancer; its ready URL is http://.
	KindBalancer = "balancer"
	// KindBalancerFloor is the balancer mode's floor (balancerfloor.go):
	// a minimal net/http server answering the balancer's load through
	// the relay at RelayURL; its ready URL is http://.
	KindBalancerFloor = "balancer-floor"
)

// childReadyTimeout bounds a child's start (binary load, listen, first line).
const childReadyTimeout = 15 * time.Second

// ServerConfig is what a server child is told through ServerEnv.
type ServerConfig struct {
	Kind        string `json:"kind"`
	Secret      string `json:"secret,omitempty"`
	BalancerURL string `json:"balancer_url,omitempty"`
	Region      string `json:"region,omitempty"`
	// MultiMachine makes a relay child one machine of a multi-machine app
	// (relay.Options.MultiMachine): it registers under its own HTTP URL
	// and advertises PublicEndpoint, the app's shared one.
	MultiMachine   bool   `json:"multi_machine,omitempty"`
	PublicEndpoint string `json:"public_endpoint,omitempty"`
	// SoakTimeoutMS > 0 runs a relay child as the connection soak wants
	// it: the relay's own bounds on connections waiting to authenticate
	// (per source too), and this authentication and header timeout.
	SoakTimeoutMS int `json:"soak_timeout_ms,omitempty"`
	// MaxRooms > 0 is a relay child's bound on rooms (relay.Options
	// MaxRooms, default relay.DefaultMaxRooms).
	MaxRooms int `json:"max_rooms,omitempty"`
	// HeartbeatSec > 0 is a relay child's heartbeat interval in seconds
	// (default relay.DefaultHeartbeatInterval).
	HeartbeatSec int `json:"heartbeat_sec,omitempty"`
	// UDPFlushMS is a relay child's UDP_FLUSH_MS (relay.Options.UDPFlush:
	// 0 the busy rule, the default; > 0 a fixed wait in milliseconds).
	UDPFlushMS int `json:"udp_flush_ms,omitempty"`
	// AdminKey is a balancer child's /v1 key (Options.WatchEvents).
	AdminKey string `json:"admin_key,omitempty"`
	// RelayURL is a balancer floor child's relay (its HTTP base URL).
	RelayURL string `json:"relay_url,omitempty"`
	// CPUProfile, when set, is the file the child writes its CPU
	// profile to (runtime/pprof), from its start until the parent stops
	// it (Options.CPUProfile).
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// ready is the one JSON line a child prints on stdout once it listens.
type ready struct {
	URL string `json:"url"` // WebSocket URL (ws://127.0.0.1:port)
	PID int    `json:"pid"`
	// HTTPURL is a relay child's main HTTP port (/metrics, /ping, links).
	HTTPURL string `json:"http_url,omitempty"`
	// UDPAddr is a relay child's LiteNetLib socket (127.0.0.1:port).
	UDPAddr string `json:"udp_addr,omitempty"`
	// UDP1Addr is its LiteNetLib 1.x socket.
	UDP1Addr string `json:"udp1_addr,omitempty"`
}

// child is a running server process. The parent owns it; stop kills it.
type child struct {
	cmd   *exec.Cmd
	stdin io.Closer // closing it tells the child to exit
	url   string
	http  string // relay children: the main HTTP port's URL
	udp   string // relay children: the LiteNetLib socket's address
	udp1  string // relay children: the LiteNetLib 1.x socket's address
	pid   int
	done  chan struct{} // closed when Wait returned
}

// startChild starts a server child and waits for its ready line. The child
// dies with the parent: it exits when its stdin closes, gets SIGKILL if
// the parent dies (Linux), and ctx's end kills it.
func startChild(ctx context.Context, o Options, cfg ServerConfig) (*child, error) {
	exe := o.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("failed to find this binary to start the %s server: %w", cfg.Kind, err)
		}
	}
	args := o.ServerArgs
	if args == nil {
		args = DefaultServerArgs
	}
	env, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the server configuration: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), ServerEnv+"="+string(env))
	if o.ServerProcs > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(o.ServerProcs))
	}
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 2 * time.Second
	setParentDeathSignal(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("failed to start the %s server: %w", cfg.Kind, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("failed to start the %s server: %w", cfg.Kind, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the %s server: %w", cfg.Kind, err)
	}
	c := &child{cmd: cmd, stdin: stdin, pid: cmd.Process.Pid, done: make(chan struct{})}
	lines := make(chan ready, 1)
	go func() {
		// Read the ready line, then drain stdout until the child exits.
		sc := bufio.NewScanner(stdout)
		var r ready
		if sc.Scan() && json.Unmarshal(sc.Bytes(), &r) == nil {
			lines <- r
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(c.done)
	}()
	t := time.NewTimer(childReadyTimeout)
	defer t.Stop()
	select {
	case r, ok := <-lines:
		if ok && r.URL != "" {
			c.url, c.http, c.udp, c.udp1 = r.URL, r.HTTPURL, r.UDPAddr, r.UDP1Addr
			return c, nil
		}
		c.stop()
		return nil, fmt.Errorf("failed to start the %s server: it exited or printed no ready line", cfg.Kind)
	case <-t.C:
		c.stop()
		return nil, fmt.Errorf("failed to start the %s server: not ready after %s", cfg.Kind, childReadyTimeout)
	case <-ctx.Done():
		c.stop()
		return nil, fmt.Errorf("failed to start the %s server: %w", cfg.Kind, context.Cause(ctx))
	}
}

// stop ends the child: stdin closed, then SIGKILL if it is still there
// after a moment, and waits for it.
func (c *child) stop() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
		return
	case <-time.After(500 * time.Millisecond):
	}
	_ = c.cmd.Process.Kill()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
}

// exited reports an error if the child is gone.
func (c *child) exited() error {
	select {
	case <-c.done:
		return errors.New("the server process exited")
	default:
		return nil
	}
}
