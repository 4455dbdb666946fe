package relay

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/delivery"
	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// The UDP transport: PurrNet's desktop, mobile and Editor builds over
// LiteNetLib 2.x (package litenet) on Options.UDPPortV2, beside WebSocket.
// Each LiteNetLib peer is one conn of the routing core, in the same id
// space, rooms and limits as WebSocket peers; a room may mix both. No
// goroutine per peer: litenet's socket reader delivers every peer's
// messages (serialised per peer) and its flusher, at most Options.UDPFlush
// after the peer was woken (or, with no flush delay, the reader right
// after a batch), pulls what the core queued for a peer (udpConn.flush)
// into LiteNetLib packets, merged, one sendmmsg for many peers.
//
// A frame goes out with its delivery method (buf.method: the client's or
// host's, ReliableOrdered for the relay's own packets). LiteNetLib sends
// only ReliableOrdered and ReliableUnordered in several packets, so a
// ReliableSequenced frame longer than one packet goes ReliableOrdered
// (PurrLay upgrades it too) and an Unreliable or Sequenced one is dropped
// and counted (too_large_for_udp); PurrNet itself never sends those
// (docs/UDP.md: it keeps 16 bytes of every packet for the relay's header).
//
// A peer's first message is its authentication. On a single machine it is
// handled on the reader at once. On a machine of a multi-machine app whose
// room may be elsewhere, looking the room up and dialling the holder can
// take seconds, which no socket reader may spend: that runs on a goroutine
// of the peer's own, and what the peer sends meanwhile waits (bounded) in
// arrival order (udp_conn.go). A peer that does not authenticate within
// the authentication timeout is dropped (litenet's PendingTimeout; the
// core confirms a peer once it has a role).

// udpEarlyMax bounds what a peer may send while its authentication is
// being routed (real clients send nothing before [3]).
const udpEarlyMax = 64

// udpBacklog is how many LiteNetLib messages a peer may have queued (not
// yet in flight) before the flush stops pulling its frames: beyond it they
// stay in the conn's queue, where the slow-receiver rules apply.
const udpBacklog = 128

// udpTransport owns the LiteNetLib endpoint and implements its Handler.
// Static after start but nat, which has its own lock, and ep, set once
// Listen returns (the socket readers may already be calling the Handler).
type udpTransport struct {
	s   *Server
	ep  atomic.Pointer[litenet.Endpoint]
	nat natTable
	m   *udpMetrics
}

// udpMetrics are purrfly_relay_udp_*: litenet's counters read at scrape
// time, plus the transport's own.
type udpMetrics struct {
	upgraded prometheus.Counter // reliable frames too long for their method, sent ReliableOrdered
	early    prometheus.Counter // frames that waited for a routed authentication

	registered []prometheus.Collector // static after startUDP: what it registered
}

// startUDP binds the LiteNetLib socket (UDPHost:UDPPortV2).
func (s *Server) startUDP() error {
	u := &udpTransport{s: s}
	u.nat.init(s.clock)
	// Metrics first: once the socket is bound, only Close may fail.
	m, err := newUDPMetrics(s.opts.Metrics, u.stats)
	if err != nil {
		return err
	}
	u.m = m
	addr := net.JoinHostPort(s.opts.UDPHost, strconv.Itoa(s.opts.UDPPortV2))
	network := "udp4"
	if ip, err := netip.ParseAddr(s.opts.UDPHost); err == nil && ip.Is6() && !ip.Is4In6() {
		network = "udp6"
	}
	ep, err := litenet.Listen(network, addr, litenet.Config{
		Key:               "PurrNet",
		Handler:           u,
		Clock:             s.clock,
		PingInterval:      900 * time.Millisecond, // as PurrLay and PurrNet's client
		DisconnectTimeout: s.opts.UDPTimeout,
		PendingTimeout:    s.opts.AuthTimeout,
		MaxMessage:        wire.MaxMessageSize + 1, // a frame and its delivery method, as a WebSocket message
		FlushDelay:        max(s.opts.UDPFlush, 0),
		Sockets:           s.opts.UDPSockets,
	})
	if err != nil {
		m.unregister(s.opts.Metrics)
		return fmt.Errorf("failed to listen on the UDP port: %w", err)
	}
	u.ep.Store(ep)
	s.udp = u
	s.core.SetNAT(u)
	return nil
}

// stats are the endpoint's counters (zero before it is bound).
func (u *udpTransport) stats() litenet.Stats {
	if ep := u.ep.Load(); ep != nil {
		return ep.Stats()
	}
	return litenet.Stats{}
}

func newUDPMetrics(reg prometheus.Registerer, stats func() litenet.Stats) (*udpMetrics, error) {
	m := &udpMetrics{
		upgraded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purrfly_relay_udp_upgraded_total",
			Help: "Reliable frames too long for their delivery method, sent ReliableOrdered instead.",
		}),
		early: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purrfly_relay_udp_early_total",
			Help: "Frames a UDP peer sent while its authentication was being routed to another machine.",
		}),
	}
	stat := func(name, help string, f func(litenet.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(stats())) })
	}
	gauge := func(name, help string, f func(litenet.Stats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(f(stats())) })
	}
	cs := []prometheus.Collector{m.upgraded, m.early,
		stat("purrfly_relay_udp_datagrams_received_total", "UDP datagrams received.", func(s litenet.Stats) uint64 { return s.Datagrams }),
		stat("purrfly_relay_udp_received_bytes_total", "UDP bytes received.", func(s litenet.Stats) uint64 { return s.Bytes }),
		stat("purrfly_relay_udp_datagrams_sent_total", "UDP datagrams sent.", func(s litenet.Stats) uint64 { return s.Sent }),
		stat("purrfly_relay_udp_send_errors_total", "UDP datagrams lost to send errors.", func(s litenet.Stats) uint64 { return s.SendErrors }),
		stat("purrfly_relay_udp_resent_total", "Reliable LiteNetLib packets sent again.", func(s litenet.Stats) uint64 { return s.Resent }),
		stat("purrfly_relay_udp_malformed_total", "Malformed UDP datagrams or packets dropped (the peer stays).", func(s litenet.Stats) uint64 { return s.Malformed }),
		stat("purrfly_relay_udp_unknown_total", "UDP datagrams from addresses with no connection.", func(s litenet.Stats) uint64 { return s.Unknown }),
		stat("purrfly_relay_udp_rate_limited_total", "Answers to unknown UDP senders not sent (rate limit).", func(s litenet.Stats) uint64 { return s.RateLimited }),
		stat("purrfly_relay_udp_refused_total", "LiteNetLib connect requests refused (bad key, full tables).", func(s litenet.Stats) uint64 { return s.Refused }),
		stat("purrfly_relay_udp_evicted_total", "Unproven pending UDP connections pushed out by newer requests.", func(s litenet.Stats) uint64 { return s.Evicted }),
		stat("purrfly_relay_udp_accepted_total", "LiteNetLib connections accepted.", func(s litenet.Stats) uint64 { return s.Accepted }),
		gauge("purrfly_relay_udp_peers", "LiteNetLib peers (pending included).", func(s litenet.Stats) int { return s.Peers }),
		gauge("purrfly_relay_udp_pending", "LiteNetLib peers not authenticated yet.", func(s litenet.Stats) int { return s.Pending }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			m.unregister(reg)
			return nil, fmt.Errorf("failed to register relay UDP metrics: %w", err)
		}
		m.registered = append(m.registered, c)
	}
	return m, nil
}

// unregister takes the collectors out again (the socket could not be
// bound: a later Start registers them anew).
func (m *udpMetrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.registered {
		reg.Unregister(c)
	}
	m.registered = nil
}

// Connected: a LiteNetLib peer proved itself; it becomes a conn, bound
// to the peer before anything can reach it. A closing relay refuses it.
func (u *udpTransport) Connected(p *litenet.Peer) bool {
	if !u.s.admitSession() {
		return false
	}
	uc := &udpConn{u: u, p: p}
	uc.c = u.s.core.MakeConn(uc)
	p.Tag = uc
	u.s.core.Publish(uc.c)
	return true
}

// Receive hands one message to the peer's conn, in a pooled buffer with
// the core's headroom.
func (u *udpTransport) Receive(p *litenet.Peer, m litenet.Method, data []byte) {
	uc := p.Tag.(*udpConn)
	b := buf.Get(buf.Headroom + len(data))
	b.Off = buf.Headroom
	b.End = buf.Headroom + copy(b.B[buf.Headroom:], data)
	b.Method = delivery.Of(m)
	uc.deliver(b)
}

// Flush pulls the peer's queued frames into LiteNetLib.
func (u *udpTransport) Flush(p *litenet.Peer) bool {
	uc, ok := p.Tag.(*udpConn)
	return ok && uc.flush()
}

// Disconnected ends the peer's conn.
func (u *udpTransport) Disconnected(p *litenet.Peer, why litenet.Reason) {
	p.Tag.(*udpConn).gone(why)
}

// Nat takes NAT introduction requests (udp_nat.go).
func (u *udpTransport) Nat(from netip.AddrPort, n litenet.NatPacket) {
	if ep := u.ep.Load(); ep != nil && n.Kind == litenet.NatRequest {
		u.nat.request(ep, from, n.Internal, n.Token)
	}
}

// canPunch: a UDP peer of this machine (not a link from another machine).
func (u *udpTransport) CanPunch(t core.Transport) bool {
	_, ok := t.(*udpConn)
	return ok
}

// expect registers a NAT introduction token for a host and a client.
func (u *udpTransport) Expect(token string, host, client core.Transport) {
	u.nat.expect(token, host.(*udpConn).p.Addr(), client.(*udpConn).p.Addr())
}

// udpAddr is the bound address of the UDP socket.
func (u *udpTransport) addr() netip.AddrPort { return u.ep.Load().LocalAddr() }
