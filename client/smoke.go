package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/purrfly/purrfly/internal/randid"
	"github.com/purrfly/purrfly/wire"
)

// DefaultSmokeTimeout bounds each smoke step when SmokeOptions.Timeout is 0.
const DefaultSmokeTimeout = 10 * time.Second

// SmokeOptions configures Smoke.
type SmokeOptions struct {
	// Balancer is the balancer's public base URL. Required.
	Balancer string
	// Region is the requested region; "" lets the balancer choose.
	Region string
	// StrictRegion fails the check when the room landed on a relay of
	// another region (the balancer falls back silently otherwise).
	StrictRegion bool
	// Room is the room name; "" means a fresh random "purrfly-smoke-<hex>".
	Room string
	// Timeout bounds each step; zero means DefaultSmokeTimeout.
	Timeout time.Duration
	// NoSessionHint connects like PurrNet's own client, without the ?s=
	// affinity hint on the WebSocket URLs (DialOptions.NoSessionHint).
	NoSessionHint bool
	// Transport connects the host and the client over WebSocket (default)
	// or UDP (LiteNetLib 2.x at the relay's udpPortV2).
	Transport Transport
	// HTTPClient is used for balancer requests and WebSocket dials; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
	// Logf, if set, gets one line per step (never a credential).
	Logf func(format string, args ...any)
}

// SmokeReport says what the smoke check did.
type SmokeReport struct {
	Region      string        // requested region
	RelayRegion string        // region of the relay serving the room ("" if /servers did not tell)
	Room        string        // room name used
	RelayURL    string        // URL host and client used, ws(s):// or udp:// (no credential)
	ClientID    wire.ConnID   // the client's id as the host saw it
	Steps       []SmokeStep   // in order
	Elapsed     time.Duration // whole run
}

// SmokeStep is one passed step and how long it took.
type SmokeStep struct {
	Name    string
	Elapsed time.Duration
}

// SmokeError says which step of the smoke check failed.
type SmokeError struct {
	Step string
	Err  error
}

func (e *SmokeError) Error() string { return "smoke: step " + e.Step + " failed: " + e.Err.Error() }
func (e *SmokeError) Unwrap() error { return e.Err }

// Smoke steps, in order.
const (
	StepAllocate     = "allocate"
	StepRegion       = "region"
	StepHostConnect  = "host-connect"
	StepJoin         = "join"
	StepClientJoin   = "client-connect"
	StepConnectSeen  = "host-sees-client"
	StepClientToHost = "client-to-host"
	StepHostToClient = "host-to-client"
	StepClientLeave  = "client-leave"
	StepHostClose    = "host-close"
)

// Smoke runs the end-to-end check that `purrctl smoke`, the rollout tool and
// the end-to-end tests share: allocate a room (POST, fresh allocation id),
// connect its host, join it, connect a client, check the host sees the
// client connect, send client -> host (arrives as [2][id][payload]) and host
// -> client (arrives unframed), let the client leave (the host gets [1][id]),
// close the host. Every step is bounded by opts.Timeout and ctx; the first
// failure returns a *SmokeError naming the step, with everything opened
// closed.
func Smoke(ctx context.Context, opts SmokeOptions) (SmokeReport, error) {
	s := newSmoke(opts, "purrfly-smoke-")
	defer s.cleanup()
	if err := s.run(ctx, []smokeStep{
		{StepAllocate, s.allocate},
		{StepRegion, s.region},
		{StepHostConnect, s.hostConnect},
		{StepJoin, s.join},
		{StepClientJoin, s.clientConnect},
		{StepConnectSeen, s.connectSeen},
		{StepClientToHost, s.clientToHost},
		{StepHostToClient, s.hostToClient},
		{StepClientLeave, s.clientLeave},
		{StepHostClose, s.hostClose},
	}); err != nil {
		return s.rep, err
	}
	s.opts.Logf("smoke passed over %s: room %s, region %q, %s", s.opts.Transport, s.rep.Room, s.rep.RelayRegion, s.rep.Elapsed.Round(time.Millisecond))
	return s.rep, nil
}

// newSmoke applies opts' defaults (a fresh room name with prefix).
func newSmoke(opts SmokeOptions, prefix string) *smoke {
	s := &smoke{opts: opts, start: time.Now()}
	if s.opts.Timeout <= 0 {
		s.opts.Timeout = DefaultSmokeTimeout
	}
	if s.opts.Logf == nil {
		s.opts.Logf = func(string, ...any) {}
	}
	if s.opts.Room == "" {
		s.opts.Room = prefix + randHex(8)
	}
	s.rep = SmokeReport{Region: opts.Region, Room: s.opts.Room}
	s.bal = &Balancer{BaseURL: opts.Balancer, HTTP: opts.HTTPClient, Timeout: s.opts.Timeout}
	s.dial = &DialOptions{NoSessionHint: opts.NoSessionHint, HTTPClient: opts.HTTPClient, Transport: opts.Transport}
	return s
}

// smokeStep is one named step of a smoke run.
type smokeStep struct {
	name string
	fn   func(context.Context) error
}

// run runs steps in order and stops at the first failure; rep.Elapsed is
// set either way.
func (s *smoke) run(ctx context.Context, steps []smokeStep) error {
	defer func() { s.rep.Elapsed = time.Since(s.start) }()
	if s.opts.Balancer == "" {
		return &SmokeError{Step: StepAllocate, Err: errors.New("no balancer URL given")}
	}
	for _, st := range steps {
		if err := s.step(ctx, st.name, st.fn); err != nil {
			return err
		}
	}
	return nil
}

// smoke is one run's state, owned by the Smoke call.
type smoke struct {
	opts   SmokeOptions
	start  time.Time
	rep    SmokeReport
	bal    *Balancer
	dial   *DialOptions
	hostC  wire.Capability
	joinC  wire.Capability
	host   *Host
	client *Client
}

func (s *smoke) step(ctx context.Context, name string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	t := time.Now()
	if err := fn(ctx); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			if !errors.Is(err, cerr) {
				err = fmt.Errorf("%w: %w", err, cerr)
			}
			if errors.Is(cerr, context.DeadlineExceeded) {
				err = fmt.Errorf("timed out after %s: %w", s.opts.Timeout, err)
			}
		}
		return &SmokeError{Step: name, Err: err}
	}
	s.rep.Steps = append(s.rep.Steps, SmokeStep{Name: name, Elapsed: time.Since(t)})
	return nil
}

func (s *smoke) cleanup() {
	if s.client != nil {
		s.client.CloseNow()
	}
	if s.host != nil {
		s.host.CloseNow()
	}
}

func (s *smoke) allocate(ctx context.Context) error {
	// As PurrNet allocates: a retryable answer (a balancer settling after
	// its start, a standby handing over) is tried again, 1 s apart.
	c, _, err := s.bal.AllocateRetry(ctx, s.opts.Region, s.opts.Room, Retry{Permanent: IsPermanent})
	if err != nil {
		return err
	}
	s.hostC = c
	s.rep.RelayURL, _ = RelayURL(c)
	switch s.opts.Transport {
	case TransportUDP:
		s.rep.RelayURL = "udp://" + net.JoinHostPort(c.Host, strconv.Itoa(c.UDPPortV2))
	case TransportUDP1:
		s.rep.RelayURL = "udp1://" + net.JoinHostPort(c.Host, strconv.Itoa(c.UDPPort))
	}
	s.opts.Logf("allocated room %s on relay %s", s.opts.Room, s.rep.RelayURL)
	return nil
}

// region finds the serving relay's region in /servers (matching host and
// port) and, with StrictRegion, checks it is the one requested.
func (s *smoke) region(ctx context.Context) error {
	servers, err := s.bal.Servers(ctx)
	if err != nil {
		if s.opts.StrictRegion {
			return err
		}
		s.opts.Logf("could not list relays to learn the room's region: %v", err)
		return nil
	}
	found := map[string]bool{}
	for _, sv := range servers {
		if sv.Host == s.hostC.Host && sv.WebSocketsPort == s.hostC.Port {
			found[sv.Region] = true
		}
	}
	if len(found) == 1 {
		for r := range found {
			s.rep.RelayRegion = r
		}
	}
	if s.opts.StrictRegion && s.opts.Region != "" && s.rep.RelayRegion != s.opts.Region {
		return fmt.Errorf("room placed on relay %s in region %q, want region %q", net.JoinHostPort(s.hostC.Host, strconv.Itoa(s.hostC.Port)), s.rep.RelayRegion, s.opts.Region)
	}
	return nil
}

func (s *smoke) hostConnect(ctx context.Context) error {
	h, err := DialHost(ctx, s.hostC, s.opts.Room, s.dial)
	if err != nil {
		return err
	}
	s.host = h
	s.opts.Logf("host connected")
	return nil
}

func (s *smoke) join(ctx context.Context) error {
	c, err := s.bal.Join(ctx, s.opts.Room)
	if err != nil {
		return err
	}
	if c.Host != s.hostC.Host || c.Port != s.hostC.Port || c.SSL != s.hostC.SSL || c.UDPPortV2 != s.hostC.UDPPortV2 {
		u, _ := RelayURL(c)
		return fmt.Errorf("join points at relay %s, allocation at %s", u, s.rep.RelayURL)
	}
	if c.Secret == s.hostC.Secret {
		return errors.New("join returned the host credential, not a client credential")
	}
	s.joinC = c
	return nil
}

func (s *smoke) clientConnect(ctx context.Context) error {
	c, err := DialClient(ctx, s.joinC, s.opts.Room, s.dial)
	if err != nil {
		return err
	}
	s.client = c
	s.opts.Logf("client connected")
	return nil
}

func (s *smoke) connectSeen(ctx context.Context) error {
	p, err := s.host.Next(ctx)
	if err != nil {
		return fmt.Errorf("host waiting for the client's connect notice: %w", err)
	}
	if p.Type != wire.ToHostConnected || len(p.IDs) != 1 || p.IDs[0] == 0 {
		return fmt.Errorf("host got packet type %d with ids %v, want one connect notice [0][id]", p.Type, p.IDs)
	}
	s.rep.ClientID = p.IDs[0]
	s.opts.Logf("host saw client %d connect", s.rep.ClientID)
	return nil
}

func (s *smoke) clientToHost(ctx context.Context) error {
	want := []byte("purrfly-smoke client->host " + randHex(8))
	if err := s.client.Send(ctx, want); err != nil {
		return err
	}
	p, err := s.host.Next(ctx)
	if err != nil {
		return fmt.Errorf("host waiting for the client's packet: %w", err)
	}
	if p.Type != wire.ToHostData || len(p.IDs) != 1 {
		return fmt.Errorf("host got packet type %d, want data [2][id][payload]", p.Type)
	}
	if p.IDs[0] != s.rep.ClientID {
		return fmt.Errorf("host got data from id %d, but client connected as %d", p.IDs[0], s.rep.ClientID)
	}
	if !bytes.Equal(p.Payload, want) {
		return fmt.Errorf("host got payload %q, want %q", p.Payload, want)
	}
	return nil
}

func (s *smoke) hostToClient(ctx context.Context) error {
	if err := s.host.KeepAlive(ctx); err != nil {
		return err
	}
	want := []byte("purrfly-smoke host->client " + randHex(8))
	if err := s.host.SendOne(ctx, s.rep.ClientID, want); err != nil {
		return err
	}
	got, err := s.client.Recv(ctx)
	if err != nil {
		return fmt.Errorf("client waiting for the host's packet: %w", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("client got %q, want %q", got, want)
	}
	return nil
}

func (s *smoke) clientLeave(ctx context.Context) error {
	if err := s.client.Close(); err != nil {
		return err
	}
	s.client = nil
	p, err := s.host.Next(ctx)
	if err != nil {
		return fmt.Errorf("host waiting for the client's disconnect notice: %w", err)
	}
	if p.Type != wire.ToHostDisconnected || len(p.IDs) != 1 || p.IDs[0] != s.rep.ClientID {
		return fmt.Errorf("host got packet type %d with ids %v, want disconnect notice [1][%d]", p.Type, p.IDs, s.rep.ClientID)
	}
	return nil
}

func (s *smoke) hostClose(ctx context.Context) error {
	err := s.host.Close()
	s.host = nil
	return err
}

func randHex(n int) string { return randid.Hex(n) }
