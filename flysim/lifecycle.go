package flysim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	fly "github.com/superfly/fly-go"
)

// opKind is work for a machine's run goroutine, the only owner of its
// process.
type opKind int

const (
	opStart    opKind = iota // start the process if none runs
	opStop                   // stop it (signal, then SIGKILL after timeout)
	opRestart                // stop if running, then start (update)
	opDestroy                // stop with SIGKILL if running, then end the goroutine
	opSignal                 // send signal to the process group (Machines API signal)
	opHostDown               // its host failed: SIGKILL, no exit recorded, no restart (host.go)
)

type op struct {
	kind    opKind
	signal  syscall.Signal // opStop/opRestart: 0 means the config's; opSignal: the signal
	timeout time.Duration  // opStop/opRestart: 0 means the config's
	done    chan struct{}  // opHostDown: closed once the process is gone
}

// opQueue bounds the pending work of one machine; a full queue answers 429.
const opQueue = 16

var errBusy = errors.New("too many pending operations on this machine")

// sourceUser is the event source of a machine created through the Machines
// API (the config's own are "flysim").
const sourceUser = "user"

// createMachine records a new machine (state created) and starts its run
// goroutine. The caller enqueues a start if it wants one.
func (s *Sim) createMachine(a *app, id, name, region string, cfg *fly.MachineConfig, source string) (*machine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("sim is closing")
	}
	if id == "" {
		for id == "" || a.machines[id] != nil || s.findMachineLocked(id) != nil {
			id = newMachineID()
		}
	} else if s.findMachineLocked(id) != nil {
		return nil, fmt.Errorf("machine id %s already exists", id)
	}
	s.cfg.Platform.fillDefaults(cfg)
	probe := &machine{app: a, config: cfg} // where this config will listen
	ip, err := s.allocIPLocked(probe.internalPortLocked(), probe.udpPortsLocked())
	if err != nil {
		return nil, err
	}
	now := s.clk.Now()
	if name == "" {
		name = a.cfg.Name + "-" + id[:6]
	}
	host := s.pickHostLocked(region, cfg)
	m := &machine{
		app: a, id: id, ip: ip, createdAt: now, ops: make(chan op, opQueue), byAPI: source == sourceUser,
		host: host, hostDown: s.hosts[host] != nil,
		name: name, region: region, state: StateCreated,
		version: newULID(now), instanceID: newULID(now), config: cfg,
		updatedAt: now, changed: make(chan struct{}),
	}
	m.resetChecksLocked(now)
	m.eventLocked(now, "launch", StateCreated, source, nil)
	a.machines[id] = m
	a.order = append(a.order, m)
	s.wg.Add(1)
	go s.run(m)
	return m, nil
}

func (s *Sim) findMachineLocked(id string) *machine {
	for _, a := range s.apps {
		if m := a.machines[id]; m != nil {
			return m
		}
	}
	return nil
}

// enqueue hands work to m's run goroutine without blocking.
func (s *Sim) enqueue(m *machine, o op) error {
	select {
	case m.ops <- o:
		return nil
	default:
		return errBusy
	}
}

// enqueueStart marks m starting and asks for a start.
func (s *Sim) enqueueStart(m *machine) {
	s.mu.Lock()
	if m.state == StateCreated || m.state == StateStopped || m.state == StateFailed {
		m.setStateLocked(StateStarting, s.clk.Now())
	}
	s.mu.Unlock()
	_ = s.enqueue(m, op{kind: opStart})
}

// run owns m's process: it applies ops in order and notices exits.
func (s *Sim) run(m *machine) {
	defer s.wg.Done()
	var p *process
	var stopChecks func()
	endChecks := func() {
		if stopChecks != nil {
			stopChecks()
			stopChecks = nil
		}
	}
	stop := func(sig syscall.Signal, timeout time.Duration, requested bool) {
		endChecks()
		if p == nil {
			return
		}
		defSig, defTimeout := s.stopConfig(m)
		if sig == 0 {
			sig = defSig
		}
		if timeout <= 0 {
			timeout = defTimeout
		}
		killed := p.stop(sig, timeout)
		s.recordExit(m, p, requested, killed, 0)
		p = nil
	}
	// An automatic restart (restart.go) waits on restartT; retries counts
	// them since the last requested start.
	var restartT *time.Timer
	retries := 0
	cancelRestart := func() {
		if restartT != nil {
			restartT.Stop()
			restartT = nil
		}
	}
	start := func() {
		cancelRestart()
		s.mu.Lock()
		down := s.hostDownLocked(m)
		s.mu.Unlock()
		if p != nil || down { // a failed host runs nothing; RestoreHost starts it again
			return
		}
		var err error
		p, err = s.spawn(m)
		if err != nil {
			s.log.Warn("machine failed to start", "app", m.app.cfg.Name, "machine", m.id, "err", err)
			s.mu.Lock()
			now := s.clk.Now()
			state := StateStopped
			if s.cfg.Platform.MidUpdateStates {
				state = StateFailed // Fly: "could not start successfully"
			}
			m.state = state
			m.eventLocked(now, "exit", state, "flyd", &fly.MachineRequest{ExitEvent: &fly.MachineExitEvent{ExitCode: 127, ExitedAt: now}})
			s.mu.Unlock()
			return
		}
		stopChecks = s.startChecks(m, p)
	}
	for {
		var exited <-chan struct{}
		if p != nil {
			exited = p.done
		}
		var restartC <-chan time.Time
		if restartT != nil {
			restartC = restartT.C
		}
		select {
		case <-s.ctx.Done():
			cancelRestart()
			stop(0, 0, true)
			return
		case <-exited:
			// The process ended on its own: the machine is now stopped,
			// unless its restart policy starts it again (restart.go); its
			// exit event says which, and how many restarts it took, as
			// Fly's do.
			endChecks()
			code, sig := p.exitStatus()
			d, restart := s.restartDelay(m, code, sig, retries)
			if restart {
				retries++
				s.recordExit(m, p, false, false, retries)
				s.settle(m, StateStarting)
				restartT = time.NewTimer(d)
			} else {
				s.recordExit(m, p, false, false, 0)
			}
			p = nil
		case <-restartC:
			restartT = nil
			s.log.Info("machine restarted by its restart policy", "app", m.app.cfg.Name, "machine", m.id, "retries", retries)
			start()
		case o := <-m.ops:
			switch o.kind {
			case opStart:
				retries = 0
				start()
			case opSignal:
				if p != nil {
					signalGroup(p, o.signal)
				}
			case opHostDown:
				// The host is gone: nothing stops the process gracefully,
				// nothing records its exit, no policy restarts it.
				cancelRestart()
				endChecks()
				if p != nil {
					signalGroup(p, syscall.SIGKILL)
					select {
					case <-p.done:
					case <-time.After(10 * time.Second):
					}
					s.mu.Lock()
					if m.pid == p.pid {
						m.pid = 0
					}
					s.mu.Unlock()
					p = nil
				}
				close(o.done)
			case opStop:
				cancelRestart()
				stop(o.signal, o.timeout, true)
				s.settle(m, StateStopped)
			case opRestart:
				retries = 0
				stop(o.signal, o.timeout, true)
				s.settle(m, StateStarting)
				start()
			case opDestroy:
				cancelRestart()
				stop(syscall.SIGKILL, time.Second, true)
				s.mu.Lock()
				now := s.clk.Now()
				m.state = StateDestroyed
				m.lease = nil
				m.eventLocked(now, "destroy", StateDestroyed, "user", nil)
				s.mu.Unlock()
				return
			}
		}
	}
}

// settle moves m to state unless it was destroyed meanwhile.
func (s *Sim) settle(m *machine, state string) {
	s.mu.Lock()
	if m.state != StateDestroyed && m.state != state {
		m.setStateLocked(state, s.clk.Now())
	}
	s.mu.Unlock()
}

// stopConfig is the signal and timeout that stop m: its config's stop_config,
// else the app's kill_signal/kill_timeout.
func (s *Sim) stopConfig(m *machine) (syscall.Signal, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sig, _ := parseSignal(m.app.cfg.KillSignal)
	timeout := m.app.cfg.KillTimeout.Duration
	if sc := m.config.StopConfig; sc != nil {
		if sc.Signal != nil {
			if v, err := parseSignal(*sc.Signal); err == nil {
				sig = v
			}
		}
		if sc.Timeout != nil && sc.Timeout.Duration > 0 {
			timeout = min(sc.Timeout.Duration, MaxKillTimeout)
		}
	}
	return sig, timeout
}

// recordExit turns a finished process into an exit event and, unless the
// exit is part of a restart (the caller then settles the state), a stopped
// machine. restarts, when not 0, says the restart policy starts it again,
// for the restarts-th time since its last requested start.
func (s *Sim) recordExit(m *machine, p *process, requested, killed bool, restarts int) {
	code, sig := p.exitStatus()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	if m.pid == p.pid {
		m.pid = 0
	}
	if m.state != StateDestroyed {
		m.state = StateStopped
	}
	m.eventLocked(now, "exit", StateStopped, "flyd", &fly.MachineRequest{RestartCount: restarts, ExitEvent: &fly.MachineExitEvent{
		ExitCode: code, Signal: sig, RequestedStop: requested, Restarting: restarts > 0, ExitedAt: now,
	}})
	s.met.machineExits.WithLabelValues(m.app.cfg.Name, strconv.FormatBool(requested)).Inc()
	s.log.Info("machine process exited", "app", m.app.cfg.Name, "machine", m.id,
		"pid", p.pid, "exit_code", code, "signal", sig, "requested", requested, "killed_after_timeout", killed)
}

// waitState blocks until m is in one of states (at version, when given:
// version matches either the machine version or its instance id), the
// timeout passes (false) or ctx ends.
func (s *Sim) waitState(ctx context.Context, m *machine, states []string, version string, timeout time.Duration) (bool, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok := false
		for _, st := range states {
			if m.state == st {
				ok = true
			}
		}
		if version != "" && version != m.version && version != m.instanceID {
			ok = false
		}
		destroyed := m.state == StateDestroyed
		ch := m.changed
		s.mu.Unlock()
		if ok {
			return true, nil
		}
		if destroyed {
			return false, errDestroyed
		}
		select {
		case <-ch:
		case <-t.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-s.ctx.Done():
			return false, errors.New("sim is closing")
		}
	}
}

var errDestroyed = errors.New("machine was destroyed")
