package flysim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
)

// DefaultStartTimeout bounds how long Start waits for the machines of the
// config to listen.
const DefaultStartTimeout = 30 * time.Second

// Options are the run-time choices of a Sim. The zero value works.
type Options struct {
	// LogDir receives one <app>-<machine id>.log per machine (stdout and
	// stderr of every boot, appended). Default: a new temporary directory.
	LogDir string
	// Logger for the emulator's own messages; nil means slog.Default().
	Logger *slog.Logger
	// Executable replaces "{exe}" in image commands; default os.Executable().
	Executable string
	// Stdout, when set, receives the table of apps, machines and URLs once
	// Start has brought everything up.
	Stdout io.Writer
	// Clock drives lease expiry and timestamps; nil means the wall clock.
	Clock clock.Clock
	// StartTimeout bounds Start's wait for the machines to listen.
	StartTimeout time.Duration
	// Registerer receives the Sim's metrics; nil means a private registry.
	Registerer prometheus.Registerer
	// CheckRetry is how often a check that has not yet passed on the current
	// boot is retried (default 200 ms), so a fresh machine joins the proxy's
	// pool promptly; after its first pass a check runs at its interval.
	CheckRetry time.Duration
	// UDPIdleTimeout ends a UDP flow that carried no datagram either way for
	// this long, on Clock (default DefaultUDPIdleTimeout).
	UDPIdleTimeout time.Duration
	// UDPMaxFlows bounds the flows of one UDP service (default
	// DefaultUDPMaxFlows); a new client past it ends the flow idle longest.
	UDPMaxFlows int
}

// State is what `purrctl sim --state FILE` writes once everything is up.
type State struct {
	MachinesAPI string `json:"machines_api"`
	Token       string `json:"token"`
	// DeployTokens are the apps' app-scoped tokens (Platform.DeployTokens).
	DeployTokens map[string]string   `json:"deploy_tokens,omitempty"`
	DNS          string              `json:"dns"`
	Apps         map[string]AppState `json:"apps"`
}

// AppState is the public side of one app.
type AppState struct {
	URL string `json:"url"`
	// UDP maps the internal port of each UDP service ("7778") to the public
	// address clients send to ("127.0.0.1:4401").
	UDP map[string]string `json:"udp,omitempty"`
	// Reserved is set for an app the config declares reserved that no
	// client has created yet (at the time of the State call): its addresses
	// are held, the Machines API and DNS do not know it yet.
	Reserved bool `json:"reserved,omitempty"`
}

// Sim is a running emulated organisation. Its methods may be called
// concurrently.
type Sim struct {
	// Static after New.
	cfg    *Config
	opts   Options
	log    *slog.Logger
	clk    clock.Clock
	exe    string
	logDir string
	met    *metrics

	// ctx is cancelled by Close; every goroutine of the Sim watches it and is
	// counted in wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex // guards everything below and every app/machine record
	apps     map[string]*app
	order    []*app
	usedIPs  map[string]bool
	nextIP   uint32
	spawned  []int // pid of every boot ever started (tests check none survives Close)
	faults   []*Fault
	links    map[string]*link      // by name, set in bind, static afterwards
	dnsStale map[string]*staleDNS  // by app: frozen DNS answers (netfault.go)
	hosts    map[string]*hostState // failed hosts by name (host.go)
	started  bool
	closed   bool

	api *apiServer // set by Start
	dns *dnsServer // set by Start
}

// New checks cfg and prepares a Sim; nothing is bound or started yet.
func New(cfg *Config, opts Options) (*Sim, error) {
	if cfg == nil {
		return nil, errors.New("failed to create sim: nil config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("failed to create sim: %w", err)
	}
	exe, err := executable(opts.Executable)
	if err != nil {
		return nil, err
	}
	logDir := opts.LogDir
	if logDir == "" {
		logDir, err = os.MkdirTemp("", "flysim-logs-")
		if err != nil {
			return nil, fmt.Errorf("failed to create log dir: %w", err)
		}
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create log dir: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.CheckRetry <= 0 {
		opts.CheckRetry = 200 * time.Millisecond
	}
	if opts.UDPIdleTimeout <= 0 {
		opts.UDPIdleTimeout = DefaultUDPIdleTimeout
	}
	if opts.UDPMaxFlows <= 0 {
		opts.UDPMaxFlows = DefaultUDPMaxFlows
	}
	base, err := parseIPv4(cfg.MachineIPBase)
	if err != nil {
		return nil, err
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("failed to register metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sim{
		cfg: cfg, opts: opts, log: opts.Logger.With("component", "flysim"), met: met,
		clk: clock.OrReal(opts.Clock), exe: exe, logDir: logDir,
		ctx: ctx, cancel: cancel,
		apps: map[string]*app{}, usedIPs: map[string]bool{}, nextIP: base,
		links: map[string]*link{}, dnsStale: map[string]*staleDNS{}, hosts: map[string]*hostState{},
	}
	now := s.clk.Now()
	for _, ac := range cfg.Apps {
		a := newApp(ac, now)
		s.apps[ac.Name] = a
		s.order = append(s.order, a)
	}
	return s, nil
}

// LogDir is where machine output goes.
func (s *Sim) LogDir() string { return s.logDir }

// Start binds the Machines API, the DNS server and every app's proxy and UDP
// services, creates and starts the configured machines app by app in config
// order, and returns once each is listening on its internal port (or has
// stopped, as a broken image does) and its checks pass (waited for at most
// 10 s a machine, then only logged); an app's UDP services pick their
// machine once the app is up. ctx bounds only that start-up; the Sim runs until Close. On
// error everything already started is stopped again.
func (s *Sim) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		return errors.New("failed to start sim: already started or closed")
	}
	s.started = true
	s.mu.Unlock()
	if err := s.bind(); err != nil {
		_ = s.Close()
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	// Apps come up in config order, each routable before the next starts
	// (list the balancer first and relays find it on their first attempt).
	for _, a := range s.order {
		var ms []*machine
		for _, spec := range a.cfg.Machines {
			cfg := initialConfig(a.cfg, spec)
			if spec.StandbyFor != "" {
				cfg.Standbys = []string{spec.StandbyFor}
			}
			m, err := s.createMachine(a, spec.ID, spec.Name, spec.Region, cfg, "flysim")
			if err != nil {
				_ = s.Close()
				return fmt.Errorf("failed to create machine of %s: %w", a.cfg.Name, err)
			}
			if spec.StandbyFor != "" {
				continue // a standby waits, stopped, for its machine's host to fail
			}
			s.enqueueStart(m)
			ms = append(ms, m)
		}
		for _, m := range ms {
			if err := s.waitListening(ctx, m); err != nil {
				_ = s.Close()
				return fmt.Errorf("failed to start machine %s of %s: %w", m.id, a.cfg.Name, err)
			}
		}
		for _, m := range ms {
			s.waitChecks(ctx, m)
		}
		for _, f := range a.udp {
			f.open() // the app is up: its UDP services pick their machine
		}
	}
	if s.opts.Stdout != nil {
		s.WriteTable(s.opts.Stdout)
	}
	return nil
}

func (s *Sim) bind() error {
	d, err := startDNS(s, s.cfg.DNS)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.dns = d
	s.mu.Unlock()
	api, err := startAPI(s, s.cfg.MachinesAPI)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.api = api
	s.mu.Unlock()
	for _, a := range s.order {
		p, err := startProxy(s, a)
		if err != nil {
			return err
		}
		s.mu.Lock()
		a.proxy = p
		s.mu.Unlock()
		for _, svc := range a.cfg.UDP {
			f, err := startUDP(s, a, svc)
			if err != nil {
				return err
			}
			s.mu.Lock()
			a.udp = append(a.udp, f)
			s.mu.Unlock()
		}
	}
	for _, lc := range s.cfg.Links {
		l, err := startLink(s, lc, hostPortOf(s.AppURL(lc.App)))
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.links[lc.Name] = l
		s.mu.Unlock()
	}
	return nil
}

// waitListening polls until m accepts TCP on its internal port, or is no
// longer starting or started (a process that exited is a valid outcome).
func (s *Sim) waitListening(ctx context.Context, m *machine) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		state, addr := m.state, net.JoinHostPort(m.ip, fmt.Sprint(m.internalPortLocked()))
		s.mu.Unlock()
		switch state {
		case StateStopped, StateFailed, StateDestroyed:
			return nil
		case StateStarted:
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err == nil {
				_ = c.Close()
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not listening on %s (state %s): %w", addr, state, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// startCheckWait bounds how long Start waits for one machine's checks: a
// failing check is not a start failure (the table shows it), only a delay.
const startCheckWait = 10 * time.Second

// waitChecks waits until m's checks pass (or m stopped), at most
// startCheckWait; it only logs when they do not.
func (s *Sim) waitChecks(ctx context.Context, m *machine) {
	ctx, cancel := context.WithTimeout(ctx, startCheckWait)
	defer cancel()
	for {
		s.mu.Lock()
		ok := m.healthyLocked() || m.state != StateStarted
		ch := m.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			s.log.Warn("machine checks not passing at start", "app", m.app.cfg.Name, "machine", m.id)
			return
		}
	}
}

// State is the address book of the running Sim: every app of the config,
// reserved ones included (marked until created), since their addresses are
// bound from Start on.
func (s *Sim) State() State {
	st := State{Token: s.cfg.Token, Apps: map[string]AppState{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.api != nil {
		st.MachinesAPI = s.api.url
	}
	if s.dns != nil {
		st.DNS = s.dns.addr
	}
	for _, a := range s.order {
		if a.proxy == nil {
			continue
		}
		as := AppState{URL: a.proxy.url, Reserved: !a.created}
		for _, f := range a.udp {
			if as.UDP == nil {
				as.UDP = map[string]string{}
			}
			as.UDP[strconv.Itoa(f.svc.InternalPort)] = f.addr
		}
		st.Apps[a.cfg.Name] = as
		if s.cfg.Platform.DeployTokens {
			if st.DeployTokens == nil {
				st.DeployTokens = map[string]string{}
			}
			st.DeployTokens[a.cfg.Name] = s.cfg.deployToken(a.cfg.Name)
		}
	}
	return st
}

// AppURL is the public proxy URL of an app ("" if unknown or not started).
func (s *Sim) AppURL(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.apps[name]; a != nil && a.proxy != nil {
		return a.proxy.url
	}
	return ""
}

// UDPAddr is the public address of an app's UDP service on internalPort
// ("" if unknown or not started).
func (s *Sim) UDPAddr(name string, internalPort int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.apps[name]; a != nil {
		for _, f := range a.udp {
			if f.svc.InternalPort == internalPort {
				return f.addr
			}
		}
	}
	return ""
}

// Close stops every machine (kill_signal, then SIGKILL after kill_timeout,
// all machines at once), closes the proxies (and their WebSocket tunnels),
// the UDP services (and their flows), the Machines API and the DNS server,
// and waits for every goroutine. It is safe to call more than once.
func (s *Sim) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	apps := append([]*app(nil), s.order...)
	api, dns := s.api, s.dns
	links := make([]*link, 0, len(s.links))
	for _, l := range s.links {
		links = append(links, l)
	}
	var holes []*blackhole
	for _, hs := range s.hosts {
		holes = append(holes, hs.holes...)
		hs.holes = nil
	}
	s.mu.Unlock()
	for _, h := range holes {
		h.close()
	}

	s.cancel() // actors stop their processes; waits return
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if api != nil {
		errs = append(errs, api.close(ctx))
	}
	for _, a := range apps {
		if a.proxy != nil {
			errs = append(errs, a.proxy.close(ctx))
		}
		s.mu.Lock()
		udp := append([]*udpForwarder(nil), a.udp...)
		s.mu.Unlock()
		for _, f := range udp {
			errs = append(errs, f.close())
		}
	}
	for _, l := range links {
		errs = append(errs, l.close())
	}
	s.wg.Wait() // actors: every process is gone once this returns
	if dns != nil {
		// Its own bound: the machines' stops (kill_timeout each, up to
		// 300 s) may have used up ctx's, and a DNS server that has
		// outlived every machine has nothing left to wait for.
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, dns.close(dctx))
		dcancel()
	}
	return errors.Join(errs...)
}

func parseIPv4(s string) (uint32, error) {
	ip := net.ParseIP(s).To4()
	if ip == nil {
		return 0, fmt.Errorf("bad IPv4 address %q", s)
	}
	return uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3]), nil
}

// allocIPLocked hands out the next loopback address on which port (TCP)
// and udpPorts are free (probed by binding them), so machines never collide
// with each other or with another Sim on the same host.
func (s *Sim) allocIPLocked(port int, udpPorts []int) (string, error) {
	for tries := 0; tries < 1024; tries++ {
		n := s.nextIP
		s.nextIP++
		if n&0xff == 0 || n&0xff == 0xff || n>>24 != 127 {
			continue
		}
		ip := net.IPv4(byte(n>>24), byte(n>>16), byte(n>>8), byte(n)).String()
		if s.usedIPs[ip] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
		if err != nil {
			continue
		}
		_ = ln.Close()
		if !udpFree(ip, udpPorts) {
			continue
		}
		s.usedIPs[ip] = true
		return ip, nil
	}
	return "", errors.New("failed to find a free loopback address")
}

// udpFree reports whether every one of ports can be bound (UDP) on ip.
func udpFree(ip string, ports []int) bool {
	for _, p := range ports {
		c, err := net.ListenPacket("udp", net.JoinHostPort(ip, fmt.Sprint(p)))
		if err != nil {
			return false
		}
		_ = c.Close()
	}
	return true
}
