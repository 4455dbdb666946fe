package litenet

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// event is what a recorder saw.
type event struct {
	kind string // connected, recv, disconnected, nat
	p    *Peer
	m    Method
	data []byte
	why  Reason
	from netip.AddrPort
	nat  NatPacket
	at   time.Time // recv: Peer.Arrival during Receive
}

// recorder is a Handler that records every event on a channel (copying
// the data), confirms new peers, and optionally echoes messages back with
// their method, as the capture's server did.
type recorder struct {
	events    chan event
	echo      bool
	noConfirm atomic.Bool
	refuse    atomic.Bool // Connected refuses new peers
}

func newRecorder(echo bool) *recorder {
	return &recorder{events: make(chan event, 4096), echo: echo}
}

func (r *recorder) Connected(p *Peer) bool {
	if !r.noConfirm.Load() {
		p.Confirm()
	}
	r.events <- event{kind: "connected", p: p}
	return !r.refuse.Load()
}

func (r *recorder) Receive(p *Peer, m Method, data []byte) {
	if r.echo {
		_ = p.Send(m, data)
	}
	r.events <- event{kind: "recv", p: p, m: m, data: append([]byte(nil), data...), at: p.Arrival()}
}

func (r *recorder) Flush(*Peer) bool { return false }

func (r *recorder) Disconnected(p *Peer, why Reason) {
	r.events <- event{kind: "disconnected", p: p, why: why}
}

func (r *recorder) Nat(from netip.AddrPort, n NatPacket) {
	n.Token = append([]byte(nil), n.Token...)
	r.events <- event{kind: "nat", from: from, nat: n}
}

// next returns the next event, failing the test after d.
func (r *recorder) next(tb testing.TB, d time.Duration) event {
	tb.Helper()
	select {
	case ev := <-r.events:
		return ev
	case <-time.After(d): // wall clock: a bound on a real socket's answer
		tb.Fatalf("no event within %v", d)
	}
	return event{}
}

// waitKind skips events until one of kind arrives.
func (r *recorder) waitKind(tb testing.TB, kind string, d time.Duration) event {
	tb.Helper()
	deadline := time.Now().Add(d) // wall clock: a bound on real sockets
	for {
		left := time.Until(deadline)
		if left <= 0 {
			tb.Fatalf("no %s event within %v", kind, d)
		}
		if ev := r.next(tb, left); ev.kind == kind {
			return ev
		}
	}
}

// testVersion is the wire version listen, dial and newRaw use unless a
// Config names 1.x itself; bothVersions runs a test under each. Tests do
// not run in parallel, so a plain variable does.
var testVersion = V2

// bothVersions runs f as a subtest for LiteNetLib 2.x, then for 1.x: the
// same engine, the same behaviour, the wire renumbered (rawConn speaks
// the version too, so a test writes and reads packets in the engine's
// numbering).
func bothVersions(t *testing.T, f func(t *testing.T)) {
	for _, v := range []Version{V2, V1} {
		t.Run(v.String(), func(t *testing.T) {
			testVersion = v
			defer func() { testVersion = V2 }()
			f(t)
		})
	}
}

// listen starts a server endpoint on loopback with cfg (Key and Handler
// defaulted) and closes it at cleanup.
func listen(tb testing.TB, cfg Config) *Endpoint {
	tb.Helper()
	if cfg.Key == "" {
		cfg.Key = "PurrNet"
	}
	if cfg.Version == V2 {
		cfg.Version = testVersion
	}
	e, err := Listen("udp4", "127.0.0.1:0", cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

// dial connects a client endpoint to e and closes it at cleanup.
func dial(tb testing.TB, to netip.AddrPort, cfg Config) (*Endpoint, *Peer) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.Version == V2 {
		cfg.Version = testVersion
	}
	ce, p, err := Dial(ctx, to, "PurrNet", cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ce.Close() })
	return ce, p
}

// rawConn is a plain UDP socket for crafted datagrams, written and read
// in the engine's numbering and renumbered on the wire for version v.
type rawConn struct {
	tb     testing.TB
	c      *net.UDPConn
	to     netip.AddrPort
	v      Version
	proved []byte // the ping connectRaw answered to prove the address
}

func newRaw(tb testing.TB, to netip.AddrPort) *rawConn {
	tb.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return &rawConn{tb: tb, c: c, to: to, v: testVersion}
}

func (r *rawConn) addr() netip.AddrPort { return r.c.LocalAddr().(*net.UDPAddr).AddrPort() }

func (r *rawConn) send(b []byte) {
	r.tb.Helper()
	b = append([]byte(nil), b...)
	ToWire(r.v, b)
	if _, err := r.c.WriteToUDPAddrPort(b, r.to); err != nil {
		r.tb.Fatal(err)
	}
}

// recv returns the next datagram, or nil after d.
func (r *rawConn) recv(d time.Duration) []byte {
	buf := make([]byte, 2048)
	_ = r.c.SetReadDeadline(time.Now().Add(d)) // wall clock: a bound on a real socket's answer
	n, _, err := r.c.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil
	}
	FromWire(r.v, buf[:n])
	return buf[:n]
}

// mustRecv is recv that fails the test on silence.
func (r *rawConn) mustRecv(d time.Duration) []byte {
	r.tb.Helper()
	b := r.recv(d)
	if b == nil {
		r.tb.Fatalf("no datagram within %v", d)
	}
	return b
}

// packets splits a datagram into its packets (Merged unpacked).
func packets(b []byte) [][]byte { return Packets(b) }

// fakeClock returns a fake clock for an endpoint's timers.
func fakeClock() *clock.Fake { return clock.NewFake(time.Unix(1_800_000_000, 0)) }

// collect gathers n events of kind recv, in order.
func (r *recorder) collect(tb testing.TB, n int, d time.Duration) []event {
	tb.Helper()
	var out []event
	for len(out) < n {
		out = append(out, r.waitKind(tb, "recv", d))
	}
	return out
}

func netipLoop(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)
}

// settle waits until every socket of the endpoints is quiet: the reader
// between batches, nothing woken (or, with a FlushDelay, woken peers
// waiting for the flusher's timer), the flusher parked with its timer
// armed.
// Tests on a fake clock call it before Advance, since the flusher arms its
// timer relative to the time it sees.
func settle(tb testing.TB, es ...*Endpoint) {
	tb.Helper()
	deadline := time.Now().Add(wait) // wall clock: bounds a wait for goroutines to park
	for {
		quiet := true
		for _, e := range es {
			for _, s := range e.socks {
				s.dirtyMu.Lock()
				dirty := len(s.dirty)
				s.dirtyMu.Unlock()
				waiting := dirty == 0 || e.cfg.FlushDelay > 0
				quiet = quiet && !s.readerActive.Load() && s.parked.Load() && len(s.poke) == 0 && waiting
			}
		}
		if quiet {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal("the endpoint did not settle")
		}
		runtime.Gosched()
	}
}

// advance settles the endpoints, then moves the fake clock.
func advance(tb testing.TB, clk *clock.Fake, d time.Duration, es ...*Endpoint) {
	tb.Helper()
	settle(tb, es...)
	clk.Advance(d)
}

// waitArmed waits until n timers of clk are armed.
func waitArmed(tb testing.TB, clk *clock.Fake, n int) {
	tb.Helper()
	deadline := time.Now().Add(wait) // wall clock: bounds a wait for goroutines to park
	for clk.Waiters() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("%d timers armed, want %d", clk.Waiters(), n)
		}
		runtime.Gosched()
	}
}
