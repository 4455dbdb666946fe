package flysim

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// udpFlow is one client address of a UDP service with a socket of its own
// on 127.0.0.1: the address the machines see as the client's. The socket is
// not connected, so the flow follows the serving machine when it changes
// (the new machine sees the same address) and an ICMP port unreachable from
// a machine that does not listen never fails it.
type udpFlow struct {
	// Static after creation.
	client netip.AddrPort
	conn   *net.UDPConn

	// lastSeen is the Sim-clock time (unix nanoseconds) of the flow's latest
	// datagram either way: written by readPublic and the flow's readFlow,
	// read by the sweeper and by eviction.
	lastSeen atomic.Int64
}

func (fl *udpFlow) touch(now time.Time) { fl.lastSeen.Store(now.UnixNano()) }
func (fl *udpFlow) last() time.Time     { return time.Unix(0, fl.lastSeen.Load()) }

// flowFor finds client's flow or opens one, ending the flow idle longest
// when the forwarder already holds maxFlows. Only readPublic calls it, so
// two flows of one client are never opened at once.
func (f *udpForwarder) flowFor(client netip.AddrPort) (*udpFlow, error) {
	f.mu.Lock()
	fl, closed := f.flows[client], f.closed
	f.mu.Unlock()
	if fl != nil {
		return fl, nil
	}
	if closed {
		return nil, errUDPClosed
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("failed to open a flow socket: %w", err)
	}
	fl = &udpFlow{client: client, conn: conn}
	fl.touch(f.s.clk.Now())
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = conn.Close()
		return nil, errUDPClosed
	}
	if len(f.flows) >= f.maxFlows {
		f.endFlowLocked(f.idlestLocked(), f.met.evictedEnds)
	}
	f.flows[client] = fl
	f.met.flows.Inc()
	f.wg.Add(1)
	go f.readFlow(fl)
	f.touchLocked()
	return fl, nil
}

// idlestLocked is the flow whose last datagram is the oldest (a scan: it
// runs only when a new client finds the forwarder full).
func (f *udpForwarder) idlestLocked() *udpFlow {
	var out *udpFlow
	for _, fl := range f.flows {
		if out == nil || fl.last().Before(out.last()) {
			out = fl
		}
	}
	return out
}

// endFlowLocked forgets fl and closes its socket (its readFlow then ends).
func (f *udpForwarder) endFlowLocked(fl *udpFlow, reason prometheus.Counter) {
	if fl == nil || f.flows[fl.client] != fl {
		return
	}
	delete(f.flows, fl.client)
	_ = fl.conn.Close()
	f.met.flows.Dec()
	reason.Inc()
	f.touchLocked()
}

// readFlow relays what machines send to fl's socket to fl's client, from
// the public socket, unchanged. Only datagrams from a machine of the app at
// its service address (<its ip>:<internal port>) pass: on Fly a reply must
// leave from fly-global-services at the service port. A read error other
// than the socket's closing (ECONNREFUSED where the kernel reports an ICMP
// port unreachable) is counted and skipped: the flow lives on.
func (f *udpForwarder) readFlow(fl *udpFlow) {
	defer f.wg.Done()
	buf := make([]byte, udpBufSize) // the flow's own, reused for every datagram
	for {
		n, from, err := fl.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			f.met.readError.Inc()
			continue
		}
		r := f.route.Load()
		if r.noIPv4 { // the dedicated IPv4 went away: nothing leaves either
			f.met.noIPv4.Inc()
			continue
		}
		if _, ok := r.members[netip.AddrPortFrom(from.Addr().Unmap(), from.Port())]; !ok {
			f.met.foreign.Inc()
			continue
		}
		fl.touch(f.s.clk.Now())
		f.met.toClient.Inc() // before the send: counted by the time the client has it
		if _, err := f.conn.WriteToUDPAddrPort(buf[:n], fl.client); err != nil {
			f.met.sendError.Inc()
		}
	}
}
