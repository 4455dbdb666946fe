package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// measure connects the load to t, runs the traffic (or holds the idle
// connections) and reads the server's CPU and memory around the measured
// window; in the forwarding mode the server is both relays, the holder
// and the edge, and their figures are summed. t's children are checked to
// still be alive at the end.
func measure(ctx context.Context, o Options, t target) (*Side, error) {
	s := &Side{Server: t.name, ServerPID: t.pid, EdgePID: t.edgePID}
	if t.echo() {
		s.Server = "echo"
	}
	m, edge := meter{pid: t.pid}, meter{pid: t.edgePID}
	s.RSSStartBytes = m.rss() + edge.rss()
	mesh, lnl := newRelayMeter(t.edgeMetrics), newRelayMeter(t.metrics)
	defer mesh.close()
	defer lnl.close()
	mesh.read(ctx, 0)
	lnl.read(ctx, 0)
	start := time.Now()
	rooms, err := connect(ctx, o, t)
	if err != nil {
		return nil, err
	}
	s.ConnectSeconds = round3(time.Since(start).Seconds())
	for _, r := range rooms {
		s.Connections += 1 + len(r.clients)
	}
	s.RSSConnectedBytes = m.rss() + edge.rss()
	if s.RSSStartBytes > 0 && s.Connections > 0 {
		s.RSSPerConnBytes = round3(float64(s.RSSConnectedBytes-s.RSSStartBytes) / float64(s.Connections))
	}
	o.Logger.Info("connected", "server", s.Server, "connections", s.Connections, "seconds", s.ConnectSeconds)

	var tr *traffic
	if o.Idle == 0 {
		tr = newTraffic(o, rooms, t)
		tr.start()
	}
	stopAll := func() {
		if tr != nil {
			close(tr.stop)
		}
		endRooms(rooms, o)
		if tr != nil {
			tr.wg.Wait() // closed connections unblock every loop
		}
	}
	if o.Idle == 0 {
		if err := clock.Sleep(ctx, nil, o.Warmup); err != nil {
			stopAll()
			return nil, err
		}
	}
	mesh.read(ctx, 1)
	lnl.read(ctx, 1)
	self := meter{pid: pidSelf()}
	cpu0, edge0, load0, busy0, t0 := m.cpu(), edge.cpu(), self.cpu(), busy(), time.Now()
	if tr != nil {
		tr.phase.Store(phaseMeasuring)
	}
	err = clock.Sleep(ctx, nil, o.Duration)
	if tr != nil {
		tr.phase.Store(phaseDone)
	}
	s.Seconds = round3(time.Since(t0).Seconds())
	cpu1, edge1, load1, busy1 := m.cpu(), edge.cpu(), self.cpu(), busy()
	s.RSSEndBytes = m.rss() + edge.rss()
	mesh.read(ctx, 2)
	lnl.read(ctx, 2)
	stopAll()
	if err != nil {
		return nil, err
	}
	for _, ch := range t.children {
		if err := ch.exited(); err != nil {
			return nil, fmt.Errorf("%s server: %w", s.Server, err)
		}
	}
	if err := errors.Join(m.err, edge.err, mesh.err, lnl.err); err != nil {
		return nil, err
	}
	server := cpu1 - cpu0 + edge1 - edge0
	s.CPUSeconds = round3(server.Seconds())
	if s.Seconds > 0 {
		s.CPUCores = round3(s.CPUSeconds / s.Seconds)
		if t.edgePID != 0 {
			s.EdgeCPUCores = round3((edge1 - edge0).Seconds() / s.Seconds)
		}
		s.LoadCPUCores = round3((load1 - load0).Seconds() / s.Seconds)
		s.OtherCPUCores = otherCores(busy1-busy0, server, load1-load0, s.Seconds)
		s.MachineBusy, s.CPUSaturated = busyShare(busy1-busy0, s.Seconds, runtime.NumCPU())
	}
	if tr != nil {
		tr.summarize(s)
	}
	s.MeshForwards, s.MeshPackets = mesh.forwards(), mesh.packetsInWindow()
	s.UDPDatagramsIn, s.UDPDatagramsOut = lnl.udpInWindow()
	if !o.Transport.UDP() {
		s.DirectFrames, s.WriteBatches = lnl.writesInWindow()
	}
	return s, nil
}

// summarize adds the loops' counters and latencies to s.
func (tr *traffic) summarize(s *Side) {
	var h, ha histogram
	var crossings, arrivals [crossingToClient + 1]histogram
	var bytes int64
	for _, r := range tr.recvs {
		h.merge(&r.h)
		crossings[r.crossing].merge(&r.h)
		ha.merge(&r.ha)
		arrivals[r.crossing].merge(&r.ha)
		s.Messages += r.msgs
		bytes += r.bytes
		s.Errors += r.errs
	}
	for _, sd := range tr.senders {
		s.Sent += sd.sent
		s.Errors += sd.errs
		s.CreditStalls += sd.stalls
	}
	if s.Seconds > 0 {
		s.MsgsPerSec = round3(float64(s.Messages) / s.Seconds)
		s.BytesPerSec = round3(float64(bytes) / s.Seconds)
	}
	if s.Messages > 0 {
		s.CPUusPerMsg = round3(s.CPUSeconds * 1e6 / float64(s.Messages))
	}
	s.P50us, s.P99us, s.P999us = us(h.quantile(0.5)), us(h.quantile(0.99)), us(h.quantile(0.999))
	s.MaxUs = us(time.Duration(h.max))
	if rt := relayRoundTrip(&crossings); rt != nil {
		s.RTTP50us, s.RTTP99us = us(rt.quantile(0.5)), us(rt.quantile(0.99))
		s.trips.read = rt
		s.ToHostP99us, s.ToClientP99us = us(crossings[crossingToHost].quantile(0.99)), us(crossings[crossingToClient].quantile(0.99))
	}
	if ha.n > 0 {
		s.ArrivalP50us, s.ArrivalP99us = us(ha.quantile(0.5)), us(ha.quantile(0.99))
	}
	if rt := relayRoundTrip(&arrivals); rt != nil {
		s.ArrivalRTTP50us, s.ArrivalRTTP99us = us(rt.quantile(0.5)), us(rt.quantile(0.99))
		s.trips.arrival = rt
	}
	if e := &crossings[crossingEcho]; e.n > 0 { // an echo's message is its round trip
		s.trips.read = e
		if a := &arrivals[crossingEcho]; a.n > 0 {
			s.trips.arrival = a
		}
	}
	s.trips.weight = float64(s.Messages)
}

// relayRoundTrip is a relay run's round trip from its two crossings'
// latencies (cs, by crossing), taken as independent (convolved); nil
// unless both carried messages.
func relayRoundTrip(cs *[crossingToClient + 1]histogram) *histogram {
	toHost, toClient := &cs[crossingToHost], &cs[crossingToClient]
	if toHost.n == 0 || toClient.n == 0 {
		return nil
	}
	return toHost.convolve(toClient)
}

// meter reads a process's CPU and RSS; pid 0 reads nothing. The first
// error is kept.
type meter struct {
	pid int
	err error
}

func (m *meter) cpu() time.Duration {
	if m.pid == 0 {
		return 0
	}
	d, err := procCPU(m.pid)
	m.err = errors.Join(m.err, err)
	return d
}

func (m *meter) rss() int64 {
	if m.pid == 0 {
		return 0
	}
	n, err := procRSS(m.pid)
	m.err = errors.Join(m.err, err)
	return n
}

func pidSelf() int { return os.Getpid() }

// busy is machineBusy, 0 where /proc/stat cannot be read.
func busy() time.Duration {
	d, _ := machineBusy()
	return d
}

// busyShare is the share of the machine's CPU time busy in a window of
// seconds on cpus CPUs, and whether that saturated it (0.9 or more).
func busyShare(machine time.Duration, seconds float64, cpus int) (float64, bool) {
	if machine == 0 || seconds <= 0 || cpus <= 0 {
		return 0, false
	}
	b := round3(machine.Seconds() / seconds / float64(cpus))
	return b, b >= 0.9
}

func otherCores(machine, server, load time.Duration, seconds float64) float64 {
	if machine == 0 {
		return 0
	}
	return round3(max(0, (machine-server-load).Seconds()/seconds))
}

// relayMeter reads a relay child's counters (scrapeRelay) before the load
// connects, at the start of the measured window and at its end; an empty
// URL reads nothing. The first error is kept.
type relayMeter struct {
	url string
	hc  *http.Client
	c   [3]relayCounters
	err error
}

func newRelayMeter(metricsURL string) *relayMeter {
	return &relayMeter{url: metricsURL, hc: &http.Client{Timeout: scrapeTimeout}}
}

func (m *relayMeter) read(ctx context.Context, i int) {
	if m.url == "" || m.err != nil {
		return
	}
	m.c[i], m.err = scrapeRelay(ctx, m.hc, m.url)
}

func (m *relayMeter) close() { m.hc.CloseIdleConnections() }

// forwards is the connections the edge forwarded during the run.
func (m *relayMeter) forwards() int64 { return int64(m.c[2].forwards - m.c[0].forwards) }

// packetsInWindow is the frames the edge carried over its links in the
// measured window.
func (m *relayMeter) packetsInWindow() int64 { return int64(m.c[2].packets - m.c[1].packets) }

// writesInWindow is, in the measured window of a WebSocket run, the frames
// the relay's readers wrote to their receivers' sockets themselves and the
// batches its writers wrote.
func (m *relayMeter) writesInWindow() (direct, batches int64) {
	return int64(m.c[2].direct - m.c[1].direct), int64(m.c[2].batches - m.c[1].batches)
}

// udpInWindow is the datagrams the relay's LiteNetLib socket received and
// sent in the measured window.
func (m *relayMeter) udpInWindow() (in, out int64) {
	return int64(m.c[2].udpIn - m.c[1].udpIn), int64(m.c[2].udpOut - m.c[1].udpOut)
}
