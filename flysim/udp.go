package flysim

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
)

// UDP defaults and limits.
const (
	// DefaultUDPIdleTimeout ends a flow that carried no datagram either way
	// for this long (Options.UDPIdleTimeout), measured on Options.Clock.
	DefaultUDPIdleTimeout = 2 * time.Minute
	// DefaultUDPMaxFlows bounds the flows of one UDP service
	// (Options.UDPMaxFlows); a new client past it ends the flow idle longest.
	DefaultUDPMaxFlows = 4096
	// udpSweepsPerIdle is how many times per idle timeout the flows are
	// swept: a flow ends between 1 and 1.25 idle timeouts after its last
	// datagram.
	udpSweepsPerIdle = 4
	// udpBufSize holds the largest IPv4 UDP payload (65,507 bytes) whole:
	// a datagram is never truncated.
	udpBufSize = 64 << 10
	// udpPublicBuffer is the kernel buffer asked for on a public socket (the
	// kernel may grant less), so a burst of large datagrams from many
	// clients is not dropped by a default-sized one.
	udpPublicBuffer = 4 << 20
)

var errUDPClosed = errors.New("udp forwarder closed")

// udpForwarder is the public side of one UDP service of an app, what Fly's
// edge does for a dedicated IPv4: it listens on the public address, gives
// every client address a flow (a socket of its own, udp_flow.go) and sends
// each datagram to the one machine serving the service (udp_route.go);
// what a machine sends back to a flow's socket leaves through the public
// socket to that flow's client.
type udpForwarder struct {
	// Static after startUDP.
	s        *Sim
	app      *app
	svc      *UDPService
	conn     *net.UDPConn // the public socket
	addr     string       // its bound address
	idle     time.Duration
	maxFlows int
	sweep    clock.Ticker // made by startUDP, then owned by sweepLoop
	met      udpMetrics
	ready    chan struct{}  // closed by open, once Start has brought the app up
	done     chan struct{}  // closed by close
	wg       sync.WaitGroup // readPublic, watch, sweepLoop and every readFlow

	// route is written by open (the first pick), then by watch alone; every
	// datagram reads it.
	route atomic.Pointer[udpRoute]

	mu      sync.Mutex // guards flows, closed and changed
	flows   map[netip.AddrPort]*udpFlow
	closed  bool
	changed chan struct{} // closed and replaced when the flows or the serving machine change
}

// udpMetrics are a forwarder's series, resolved once (no label lookup per
// datagram).
type udpMetrics struct {
	toMachine, toClient                              prometheus.Counter
	noMachine, noIPv4, foreign, flowError, sendError prometheus.Counter
	readError                                        prometheus.Counter
	flows                                            prometheus.Gauge
	idleEnds, evictedEnds, switches                  prometheus.Counter
}

func newUDPMetrics(m *metrics, app, port string) udpMetrics {
	drop := func(reason string) prometheus.Counter { return m.udpDropped.WithLabelValues(app, port, reason) }
	return udpMetrics{
		toMachine:   m.udpDatagrams.WithLabelValues(app, port, "to_machine"),
		toClient:    m.udpDatagrams.WithLabelValues(app, port, "to_client"),
		noMachine:   drop("no_machine"),
		noIPv4:      drop("no_dedicated_ipv4"),
		foreign:     drop("foreign_source"),
		flowError:   drop("flow_error"),
		sendError:   drop("send_error"),
		readError:   drop("read_error"),
		flows:       m.udpFlows.WithLabelValues(app, port),
		idleEnds:    m.udpFlowEnds.WithLabelValues(app, port, "idle"),
		evictedEnds: m.udpFlowEnds.WithLabelValues(app, port, "evicted"),
		switches:    m.udpSwitches.WithLabelValues(app, port),
	}
}

// startUDP binds the public socket of svc and starts its reader, the
// watcher that picks the serving machine and the idle sweeper.
func startUDP(s *Sim, a *app, svc *UDPService) (*udpForwarder, error) {
	listen := a.cfg.udpListenAddr(svc)
	ua, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return nil, fmt.Errorf("failed to resolve the udp address %s of %s: %w", listen, a.cfg.Name, err)
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("failed to bind udp port %d of %s on %s: %w", svc.InternalPort, a.cfg.Name, listen, err)
	}
	_ = conn.SetReadBuffer(udpPublicBuffer)
	_ = conn.SetWriteBuffer(udpPublicBuffer)
	f := &udpForwarder{
		s: s, app: a, svc: svc, conn: conn, addr: conn.LocalAddr().String(),
		idle: s.opts.UDPIdleTimeout, maxFlows: s.opts.UDPMaxFlows,
		met:   newUDPMetrics(s.met, a.cfg.Name, strconv.Itoa(svc.InternalPort)),
		ready: make(chan struct{}), done: make(chan struct{}),
		flows: map[netip.AddrPort]*udpFlow{}, changed: make(chan struct{}),
	}
	f.route.Store(&udpRoute{})
	// Made here, not in sweepLoop: a fake clock's Advance right after Start
	// must find it.
	f.sweep = s.clk.NewTicker(max(f.idle/udpSweepsPerIdle, time.Millisecond))
	f.wg.Add(3)
	go f.readPublic()
	go f.watch()
	go f.sweepLoop()
	return f, nil
}

// close ends every flow, closes the public socket and waits for every
// goroutine of the forwarder.
func (f *udpForwarder) close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	close(f.done)
	for client, fl := range f.flows {
		delete(f.flows, client)
		_ = fl.conn.Close()
		f.met.flows.Dec()
	}
	f.touchLocked()
	f.mu.Unlock()
	err := f.conn.Close()
	f.wg.Wait()
	if err != nil {
		return fmt.Errorf("failed to close udp port %d of %s: %w", f.svc.InternalPort, f.app.cfg.Name, err)
	}
	return nil
}

// touchLocked wakes whoever waits for a change of the forwarder.
func (f *udpForwarder) touchLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// readPublic reads what clients send and hands each datagram to the
// serving machine through the client's flow. A read error other than the
// socket's closing is a datagram's fate, not the socket's (Windows reports
// an earlier ICMP port unreachable this way): it is counted and skipped.
func (f *udpForwarder) readPublic() {
	defer f.wg.Done()
	buf := make([]byte, udpBufSize)
	for {
		n, client, err := f.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			f.met.readError.Inc()
			continue
		}
		f.toMachine(buf[:n], client)
	}
}

// toMachine sends one client datagram, unchanged, to the serving machine.
func (f *udpForwarder) toMachine(b []byte, client netip.AddrPort) {
	r := f.route.Load()
	if !r.target.IsValid() {
		if r.noIPv4 {
			f.met.noIPv4.Inc()
		} else {
			f.met.noMachine.Inc()
		}
		return
	}
	fl, err := f.flowFor(client)
	if err != nil {
		f.met.flowError.Inc()
		if !errors.Is(err, errUDPClosed) {
			f.s.log.Warn("udp flow not opened", "app", f.app.cfg.Name, "port", f.svc.InternalPort, "client", client, "err", err)
		}
		return
	}
	fl.touch(f.s.clk.Now())
	f.met.toMachine.Inc() // before the send: counted by the time an answer can exist
	if _, err := fl.conn.WriteToUDPAddrPort(b, r.target); err != nil {
		f.met.sendError.Inc()
	}
}

// sweepLoop ends the flows idle for the idle timeout.
func (f *udpForwarder) sweepLoop() {
	defer f.wg.Done()
	defer f.sweep.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-f.sweep.C():
			f.expire(f.s.clk.Now())
		}
	}
}

func (f *udpForwarder) expire(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.flows {
		if now.Sub(fl.last()) >= f.idle {
			f.endFlowLocked(fl, f.met.idleEnds)
		}
	}
}

// serving is the id of the machine serving the service ("" when none).
func (f *udpForwarder) serving() string { return f.route.Load().serving }
