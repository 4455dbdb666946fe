package flysim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	fly "github.com/superfly/fly-go"
)

// Hosts. Every machine lives on one host of its region ("<region>-<n>",
// Config.HostsPerRegion of them), chosen when it is created and never
// changed: a Fly machine does not move when its host fails. A standby (a
// config with standbys) is placed on a host other than those of the
// machines it watches. FailHost and RestoreHost (or the fault route's
// host_down and host_up) take a host away and give it back:
//
//   - down: its machines' processes are SIGKILLed (no signal reaches the
//     app, no exit event: nobody is there to record one); their state stays
//     what it was, host_status "unreachable"; their private address black-
//     holes TCP (connections are accepted and never answered); the proxy and
//     UDP stop routing to them at once; DNS drops them after
//     Platform.HostDNSDrop; after Platform.StandbyStart every stopped
//     machine whose config's standbys name one of them is started;
//   - up: host_status "ok"; each of its machines that was started boots
//     again (a new process).
//
// Sim.hosts (guarded by Sim.mu) holds the down hosts; a machine's host is
// static after creation.

// DefaultHostsPerRegion is Config.HostsPerRegion's default.
const DefaultHostsPerRegion = 3

// hostState is one failed host (Sim.hosts, guarded by Sim.mu).
type hostState struct {
	since time.Time
	holes []*blackhole // one per machine address that was listening
}

// hostName is the n-th (from 1) host of region.
func hostName(region string, n int) string { return region + "-" + strconv.Itoa(n) }

// pickHostLocked places a new machine of app a in region: the up host with
// the fewest live machines, leaving out the hosts of the machines cfg is a
// standby for (when another host is up).
func (s *Sim) pickHostLocked(region string, cfg *fly.MachineConfig) string {
	avoid := map[string]bool{}
	if cfg != nil {
		for _, id := range cfg.Standbys {
			if m := s.findMachineLocked(id); m != nil {
				avoid[m.host] = true
			}
		}
	}
	load := map[string]int{}
	for _, a := range s.apps {
		for _, m := range a.order {
			if m.state != StateDestroyed {
				load[m.host]++
			}
		}
	}
	best, bestLoad := "", -1
	for pass := 0; pass < 2 && best == ""; pass++ {
		for n := 1; n <= s.cfg.HostsPerRegion; n++ {
			h := hostName(region, n)
			if s.hosts[h] != nil || (pass == 0 && avoid[h]) {
				continue
			}
			if best == "" || load[h] < bestLoad {
				best, bestLoad = h, load[h]
			}
		}
	}
	if best == "" { // every host of the region is down: Fly would wait; the Sim places it anyway
		best = hostName(region, 1)
	}
	return best
}

// hostDownLocked reports whether m's host has failed.
func (s *Sim) hostDownLocked(m *machine) bool { return m.hostDown }

// MachineHost is the host machine id lives on ("" if unknown).
func (s *Sim) MachineHost(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.findMachineLocked(id); m != nil {
		return m.host
	}
	return ""
}

// FailHost takes host down (see Hosts above) and answers the machines it
// held.
func (s *Sim) FailHost(host string) ([]string, error) {
	s.mu.Lock()
	if s.hosts[host] != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("host %s is already down", host)
	}
	var on []*machine
	for _, a := range s.order {
		for _, m := range a.order {
			if m.host == host && m.state != StateDestroyed {
				on = append(on, m)
			}
		}
	}
	if len(on) == 0 && !s.knownHostLocked(host) {
		s.mu.Unlock()
		return nil, fmt.Errorf("unknown host %q", host)
	}
	hs := &hostState{since: s.clk.Now()}
	s.hosts[host] = hs
	ids := make([]string, len(on))
	for i, m := range on {
		ids[i] = m.id
		m.hostDown = true
		m.touchLocked(hs.since) // proxy, UDP and waiters look again
	}
	s.mu.Unlock()

	for _, m := range on {
		done := make(chan struct{})
		if s.enqueue(m, op{kind: opHostDown, done: done}) == nil {
			select {
			case <-done:
			case <-s.ctx.Done():
			}
		}
		s.mu.Lock()
		addr := net.JoinHostPort(m.ip, strconv.Itoa(m.internalPortLocked()))
		started := m.state == StateStarted
		s.mu.Unlock()
		if started {
			if h, err := openBlackhole(addr); err == nil {
				s.mu.Lock()
				hs.holes = append(hs.holes, h)
				s.mu.Unlock()
			}
		}
	}
	s.met.netFaults.WithLabelValues(NetHostDown).Inc()
	s.log.Info("host down", "host", host, "machines", ids)
	s.wg.Add(1)
	go s.startStandbys(ids)
	return ids, nil
}

// knownHostLocked reports whether host is one of a region's hosts.
func (s *Sim) knownHostLocked(host string) bool {
	for _, a := range s.order {
		for _, r := range append([]string{a.cfg.PrimaryRegion}, machineRegions(a)...) {
			for n := 1; n <= s.cfg.HostsPerRegion; n++ {
				if hostName(r, n) == host {
					return true
				}
			}
		}
	}
	return false
}

func machineRegions(a *app) []string {
	var out []string
	for _, m := range a.order {
		out = append(out, m.region)
	}
	return out
}

// startStandbys starts, after Platform.StandbyStart, every stopped machine
// on an up host whose config's standbys name one of ids (Fly starts a
// standby when the machine it watches loses its host).
func (s *Sim) startStandbys(ids []string) {
	defer s.wg.Done()
	t := s.clk.NewTimer(s.cfg.Platform.StandbyStart.Duration)
	defer t.Stop()
	select {
	case <-t.C():
	case <-s.ctx.Done():
		return
	}
	var start []*machine
	s.mu.Lock()
	for _, a := range s.order {
		for _, m := range a.order {
			if m.config == nil || s.hostDownLocked(m) || (m.state != StateStopped && m.state != StateCreated) {
				continue
			}
			if slices.ContainsFunc(m.config.Standbys, func(id string) bool { return slices.Contains(ids, id) }) {
				start = append(start, m)
			}
		}
	}
	s.mu.Unlock()
	for _, m := range start {
		s.log.Info("starting a standby: the machine it watches lost its host", "app", m.app.cfg.Name, "machine", m.id, "standby_for", m.config.Standbys)
		s.enqueueStart(m)
	}
}

// RestoreHost brings host back: host_status ok, and each of its machines
// that was started boots again.
func (s *Sim) RestoreHost(host string) ([]string, error) {
	s.mu.Lock()
	hs := s.hosts[host]
	if hs == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("host %s is not down", host)
	}
	delete(s.hosts, host)
	holes := hs.holes
	var again []*machine
	var ids []string
	now := s.clk.Now()
	for _, a := range s.order {
		for _, m := range a.order {
			if m.host != host || m.state == StateDestroyed {
				continue
			}
			ids = append(ids, m.id)
			m.hostDown = false
			m.touchLocked(now)
			if m.state == StateStarted {
				again = append(again, m)
			}
		}
	}
	s.mu.Unlock()
	for _, h := range holes {
		h.close()
	}
	for _, m := range again {
		_ = s.enqueue(m, op{kind: opStart})
	}
	s.met.netFaults.WithLabelValues(NetHostUp).Inc()
	s.log.Info("host up", "host", host, "machines", ids)
	return ids, nil
}

// dnsListedLocked reports whether DNS still lists m as started: a machine
// whose host failed drops out Platform.HostDNSDrop after the failure.
func (s *Sim) dnsListedLocked(m *machine, now time.Time) bool {
	hs := s.hosts[m.host]
	return m.state == StateStarted && (hs == nil || now.Before(hs.since.Add(s.cfg.Platform.HostDNSDrop.Duration)))
}

// maxHeldConns bounds the connections one black hole holds.
const maxHeldConns = 1024

// blackhole stands for a failed host's machine address: it accepts TCP and
// never answers, as a host that is gone does not (a SYN unanswered is a
// connect that times out; here the connect succeeds and the answer never
// comes, which a caller's deadline meets the same way).
type blackhole struct {
	ln   net.Listener
	mu   sync.Mutex // guards held
	held []net.Conn
	done chan struct{}
}

func openBlackhole(addr string) (*blackhole, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	h := &blackhole{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			if len(h.held) < maxHeldConns {
				h.held = append(h.held, c)
			} else {
				_ = c.Close()
			}
			h.mu.Unlock()
		}
	}()
	return h, nil
}

func (h *blackhole) close() {
	_ = h.ln.Close()
	<-h.done
	h.mu.Lock()
	for _, c := range h.held {
		_ = c.Close()
	}
	h.held = nil
	h.mu.Unlock()
}

// HostFaultResult is the fault route's answer to a host fault.
type HostFaultResult struct {
	Host     string   `json:"host"`
	Machines []string `json:"machines"`
}

// PostHostFault sends a NetHostDown or NetHostUp fault to the Sim whose
// address book is st, from another process (purrctl sim host, chaos).
func PostHostFault(ctx context.Context, hc *http.Client, st State, f NetFault) (HostFaultResult, error) {
	var out HostFaultResult
	b, err := json.Marshal(f)
	if err != nil {
		return out, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.MachinesAPI+"/flysim/v1/faults", bytes.NewReader(b))
	if err != nil {
		return out, err
	}
	req.Header.Set("Authorization", "Bearer "+st.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return out, fmt.Errorf("failed to send the %s fault: %w", f.Kind, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("the %s fault was refused: %d %s", f.Kind, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, fmt.Errorf("malformed answer to the %s fault: %w", f.Kind, err)
	}
	return out, nil
}
