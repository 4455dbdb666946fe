package flysim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	fly "github.com/superfly/fly-go"
)

// checkSpec is one check of a machine's config, resolved for one boot.
type checkSpec struct {
	name     string
	typ      string // http or tcp
	addr     string // ip:port
	method   string
	path     string
	headers  http.Header
	interval time.Duration
	timeout  time.Duration
	grace    time.Duration
}

// checkSpecsLocked lists m's checks as Fly names them: top-level checks by
// their name, service checks as "servicecheck-NN-<type>-<port>".
func (m *machine) checkSpecsLocked() []checkSpec {
	var out []checkSpec
	if m.config == nil {
		return nil
	}
	add := func(name string, typ *string, port *int, method, path *string, hdrs []fly.MachineHTTPHeader, interval, timeout, grace *fly.Duration) {
		c := checkSpec{name: name, typ: "tcp", method: http.MethodGet, path: "/",
			interval: DefaultCheckInterval, timeout: DefaultCheckTimeout, headers: http.Header{}}
		if typ != nil && *typ != "" {
			c.typ = *typ
		}
		p := m.internalPortLocked()
		if port != nil && *port > 0 {
			p = *port
		}
		c.addr = net.JoinHostPort(m.ip, strconv.Itoa(p))
		if method != nil && *method != "" {
			c.method = *method
		}
		if path != nil && *path != "" {
			c.path = *path
		}
		for _, h := range hdrs {
			for _, v := range h.Values {
				c.headers.Add(h.Name, v)
			}
		}
		if interval != nil && interval.Duration > 0 {
			c.interval = interval.Duration
		}
		if timeout != nil && timeout.Duration > 0 {
			c.timeout = timeout.Duration
		}
		if grace != nil {
			c.grace = grace.Duration
		}
		out = append(out, c)
	}
	for name, c := range m.config.Checks {
		add(name, c.Type, c.Port, c.HTTPMethod, c.HTTPPath, c.HTTPHeaders, c.Interval, c.Timeout, c.GracePeriod)
	}
	for i, sv := range m.config.Services {
		for _, c := range sv.Checks {
			typ := "tcp"
			if c.Type != nil && *c.Type != "" {
				typ = *c.Type
			}
			port := sv.InternalPort
			if c.Port != nil && *c.Port > 0 {
				port = *c.Port
			}
			name := fmt.Sprintf("servicecheck-%02d-%s-%d", i, typ, port)
			add(name, &typ, &port, c.HTTPMethod, c.HTTPPath, c.HTTPHeaders, c.Interval, c.Timeout, c.GracePeriod)
		}
	}
	return out
}

// resetChecksLocked gives every configured check a fresh "critical, not yet
// run" status: a new boot must prove itself (a deploy tool that polls checks
// after an update must not see the previous boot's passes).
func (m *machine) resetChecksLocked(now time.Time) {
	m.checks = map[string]*fly.MachineCheckStatus{}
	for _, c := range m.checkSpecsLocked() {
		t := now
		m.checks[c.name] = &fly.MachineCheckStatus{Name: c.name, Status: fly.Critical, Output: "not yet checked", UpdatedAt: &t}
	}
}

// startChecks runs m's checks against boot p until the returned stop is
// called (by the run goroutine, when the boot ends).
func (s *Sim) startChecks(m *machine, p *process) (stop func()) {
	s.mu.Lock()
	specs := m.checkSpecsLocked()
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	for _, c := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runCheck(ctx, m, p.pid, c)
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// runCheck runs one check on its interval; until it first passes it is
// retried every Options.CheckRetry.
func (s *Sim) runCheck(ctx context.Context, m *machine, pid int, c checkSpec) {
	client := &http.Client{
		Timeout:   c.timeout,
		Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	defer client.CloseIdleConnections()
	wait := c.grace
	passedOnce := false
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		status, output := runOnce(ctx, client, c)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if m.pid == pid {
			now := s.clk.Now()
			prev := m.checks[c.name]
			if prev == nil || prev.Status != status || prev.Output != output {
				m.checks[c.name] = &fly.MachineCheckStatus{Name: c.name, Status: status, Output: output, UpdatedAt: &now}
				m.touchLocked(now)
			}
		}
		s.mu.Unlock()
		if status == fly.Passing {
			passedOnce = true
		}
		wait = c.interval
		if !passedOnce {
			wait = min(s.opts.CheckRetry, c.interval)
		}
	}
}

func runOnce(ctx context.Context, client *http.Client, c checkSpec) (fly.ConsulCheckStatus, string) {
	if c.typ == "tcp" {
		d := net.Dialer{Timeout: c.timeout}
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return fly.Critical, fmt.Sprintf("TCP connect %s: %v", c.addr, err)
		}
		_ = conn.Close()
		return fly.Passing, fmt.Sprintf("TCP connect %s: Success", c.addr)
	}
	url := "http://" + c.addr + c.path
	req, err := http.NewRequestWithContext(ctx, c.method, url, nil)
	if err != nil {
		return fly.Critical, fmt.Sprintf("bad check request: %v", err)
	}
	req.Header = c.headers.Clone()
	resp, err := client.Do(req)
	if err != nil {
		return fly.Critical, fmt.Sprintf("%s %s: %v", c.method, url, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_ = resp.Body.Close()
	out := fmt.Sprintf("%s %s: %s Output: %q", c.method, url, resp.Status, body)
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return fly.Passing, out
	}
	return fly.Critical, out
}
