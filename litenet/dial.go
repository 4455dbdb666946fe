package litenet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// DialError is why Dial failed.
type DialError struct{ Reason Reason }

func (e *DialError) Error() string { return "litenet: connect failed: " + e.Reason.String() }

// Dial connects to the LiteNetLib server at raddr with the connect key, as
// a stock client does: a ConnectRequest every 500 ms, at most 11, from a
// new socket of its own (bound to the unspecified address of raddr's
// family, port 0). It returns once the server accepted, after
// Handler.Connected; ctx bounds the wait. The returned Endpoint owns the
// socket: Close it when done (that also disconnects the peer).
func Dial(ctx context.Context, raddr netip.AddrPort, key string, cfg Config) (*Endpoint, *Peer, error) {
	cfg.Key = ""
	e, err := newEndpoint(cfg)
	if err != nil {
		return nil, nil, err
	}
	network, local := "udp4", netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	if raddr.Addr().Is6() && !raddr.Addr().Is4In6() {
		network, local = "udp6", netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
	}
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(local))
	if err != nil {
		return nil, nil, fmt.Errorf("failed to open a UDP socket: %w", err)
	}
	if err := e.addSocket(c, clientReadBatch); err != nil {
		c.Close()
		return nil, nil, err
	}
	raddr = netip.AddrPortFrom(raddr.Addr().Unmap(), raddr.Port())
	now := e.now()
	p := newPeer(e, e.socks[0], raddr, Ticks(e.clk.Now()), 0, now)
	p.state = stateOutgoing
	p.confirmed, p.proven = true, true // the server's address is the one we chose
	p.ready = make(chan struct{})
	p.request = AppendConnectRequest(nil, 0, p.connectTime, 0, raddr, key)
	e.peers.put(p)
	e.start()
	p.wake()
	select {
	case <-p.ready:
	case <-ctx.Done():
		e.Close()
		return nil, nil, fmt.Errorf("failed to connect to %s: %w", raddr, ctx.Err())
	}
	p.mu.Lock()
	state, why := p.state, p.reason
	p.mu.Unlock()
	if state != stateConnected {
		e.Close()
		return nil, nil, &DialError{Reason: why}
	}
	return e, p, nil
}
