package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/purrfly/purrfly/internal/delivery"
	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// ErrDisconnected: the relay (or the network) ended a UDP connection; the
// error names LiteNetLib's reason ("remote": the relay disconnected it).
var ErrDisconnected = errors.New("relay disconnected")

// UDP client bounds: what a reader that falls behind may have waiting
// before the connection is dropped, and how long Close waits for the
// relay's acknowledgement of what was sent.
const (
	udpQueueMax    = 8192
	udpQueueBytes  = 32 << 20
	udpCloseWait   = 3 * time.Second
	udpPingEvery   = 900 * time.Millisecond // as PurrTransport
	udpTimeout     = 5 * time.Second        // as PurrTransport
	natRequestWait = 500 * time.Millisecond // PurrNet repeats its introduce request this often
)

// udpLink is a LiteNetLib connection to the relay: its own socket and
// endpoint (litenet.Dial), messages queued by the endpoint's reader for
// this side's reader.
type udpLink struct {
	ep *litenet.Endpoint // static after dial
	p  *litenet.Peer     // static after dial
	tr Transport         // static: TransportUDP or TransportUDP1

	mu     sync.Mutex
	q      []udpMsg            // guarded by mu: received, not yet read
	qBytes int                 // guarded by mu
	why    litenet.Reason      // guarded by mu: why it ended
	nat    []litenet.NatPacket // guarded by mu: NAT messages received
	notify chan struct{}       // cap 1: a message (or the end) arrived
	natSig chan struct{}       // cap 1: a NAT message arrived
	gone   chan struct{}       // closed once the connection ended
	ended  bool                // guarded by mu

	// Push delivery (push.go): set once by push when the queue it hands
	// over is empty, so messages read meanwhile join the queue and
	// nothing overtakes it; from then on Receive and Disconnected call
	// them, holding no lock of the link's.
	onMsg func(wire.Delivery, []byte, time.Time) // guarded by mu
	onEnd func(error)                            // guarded by mu
}

type udpMsg struct {
	d    wire.Delivery
	data []byte
	at   time.Time // the datagram's arrival (DialOptions.UDPArrivals)
}

// udpTarget is the relay's UDP address for a capability: the first IPv4
// address of its host (PurrTransport resolves and takes the first IPv4) at
// udpPortV2 (udpPort for LiteNetLib 1.x), or opts.UDPAddr.
func udpTarget(ctx context.Context, c wire.Capability, opts *DialOptions) (netip.AddrPort, error) {
	if opts.UDPAddr != "" {
		ap, err := netip.ParseAddrPort(opts.UDPAddr)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("invalid UDP address %q: %w", opts.UDPAddr, err)
		}
		return ap, nil
	}
	port := c.UDPPortV2
	if opts.Transport == TransportUDP1 {
		port = c.UDPPort
	}
	if port < 1 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("invalid relay UDP port %d", port)
	}
	if ip, err := netip.ParseAddr(c.Host); err == nil {
		return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", c.Host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("failed to resolve relay host %q to an IPv4 address: %w", c.Host, err)
	}
	return netip.AddrPortFrom(ips[0].Unmap(), uint16(port)), nil
}

// dialUDP connects over LiteNetLib (tr: 2.x or 1.x) with key "PurrNet",
// set up as PurrTransport sets its client up (ping every 900 ms, 5 s
// timeout).
func dialUDP(ctx context.Context, to netip.AddrPort, tr Transport, flush time.Duration, arrivals bool) (*udpLink, error) {
	l := &udpLink{tr: tr, notify: make(chan struct{}, 1), natSig: make(chan struct{}, 1), gone: make(chan struct{})}
	ep, p, err := litenet.Dial(ctx, to, "PurrNet", litenet.Config{
		Version:           tr.version(),
		Handler:           l,
		PingInterval:      udpPingEvery,
		DisconnectTimeout: udpTimeout,
		FlushDelay:        flush,
		SendFlushes:       flush == 0, // at once: on the sender's goroutine
		Arrivals:          arrivals,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to connect to relay udp://%s: %w", to, err)
	}
	l.ep, l.p = ep, p
	return l, nil
}

// Handler of the link's endpoint.

func (l *udpLink) Connected(*litenet.Peer) bool { return true }

func (l *udpLink) Receive(p *litenet.Peer, m litenet.Method, data []byte) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	if fn := l.onMsg; fn != nil {
		l.mu.Unlock()
		fn(delivery.Of(m), data, p.Arrival())
		return
	}
	if len(l.q) >= udpQueueMax || l.qBytes+len(data) > udpQueueBytes {
		l.mu.Unlock()
		l.p.Close(false) // this side stopped reading: give up as a slow reader would be given up
		return
	}
	l.q = append(l.q, udpMsg{d: delivery.Of(m), data: append([]byte(nil), data...), at: p.Arrival()})
	l.qBytes += len(data)
	l.mu.Unlock()
	l.signal()
}

func (l *udpLink) Flush(*litenet.Peer) bool { return false }

func (l *udpLink) Disconnected(_ *litenet.Peer, why litenet.Reason) {
	l.mu.Lock()
	first := !l.ended
	if first {
		l.ended, l.why = true, why
		close(l.gone)
	}
	end := l.onEnd
	l.mu.Unlock()
	l.signal()
	if first && end != nil {
		end(l.pushEndErr())
	}
}

// push starts push delivery: what is queued is handed to fn first, on
// the caller's goroutine, batch by batch until the queue is found empty
// (what the reader brings meanwhile is queued behind), then each message
// as the endpoint's reader receives it (Receive). The end is handed to
// end once: by push if the connection ended before it went live, else by
// Disconnected. No lock is held while fn or end runs, so either may send.
func (l *udpLink) push(fn func(wire.Delivery, []byte, time.Time), end func(error)) {
	for {
		l.mu.Lock()
		q := l.q
		if len(q) == 0 {
			l.onMsg, l.onEnd = fn, end
			ended := l.ended
			l.mu.Unlock()
			if ended {
				end(l.pushEndErr())
			}
			return
		}
		l.q, l.qBytes = nil, 0
		l.mu.Unlock()
		for _, m := range q {
			fn(m.d, m.data, m.at)
		}
	}
}

// pushEndErr is the error push delivery ends with, worded as a read's.
func (l *udpLink) pushEndErr() error {
	return fmt.Errorf("failed to read from relay: %w", l.endErr())
}

func (l *udpLink) Nat(_ netip.AddrPort, n litenet.NatPacket) {
	n.Token = append([]byte(nil), n.Token...)
	l.mu.Lock()
	if len(l.nat) < 64 {
		l.nat = append(l.nat, n)
	}
	l.mu.Unlock()
	select {
	case l.natSig <- struct{}{}:
	default:
	}
}

func (l *udpLink) signal() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// link methods.

func (l *udpLink) udp() bool { return true }

func (l *udpLink) write(ctx context.Context, d wire.Delivery, b []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := l.p.Send(delivery.Method(d), b); err != nil {
		if errors.Is(err, litenet.ErrClosed) {
			return l.endErr()
		}
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	return nil
}

// next waits for the next message.
func (l *udpLink) next(ctx context.Context) (udpMsg, error) {
	for {
		l.mu.Lock()
		if len(l.q) > 0 {
			m := l.q[0]
			l.q[0] = udpMsg{}
			l.q = l.q[1:]
			l.qBytes -= len(m.data)
			l.mu.Unlock()
			return m, nil
		}
		ended := l.ended
		l.mu.Unlock()
		if ended {
			return udpMsg{}, l.endErr()
		}
		select {
		case <-l.notify:
		case <-ctx.Done():
			return udpMsg{}, ctx.Err()
		}
	}
}

func (l *udpLink) read(ctx context.Context) (wire.Delivery, []byte, error) {
	m, err := l.next(ctx)
	return m.d, m.data, err
}

func (l *udpLink) readInto(ctx context.Context, buf []byte) (wire.Delivery, int, error) {
	m, err := l.next(ctx)
	if err != nil {
		return 0, 0, err
	}
	if len(m.data) > len(buf) {
		return m.d, 0, ErrBufferTooSmall
	}
	return m.d, copy(buf, m.data), nil
}

// endErr is the error of a connection that ended.
func (l *udpLink) endErr() error {
	l.mu.Lock()
	why := l.why
	l.mu.Unlock()
	return fmt.Errorf("%w (%s)", ErrDisconnected, why)
}

// close disconnects after what was sent is acknowledged (or udpCloseWait).
func (l *udpLink) close() error {
	l.p.Close(true)
	t := time.NewTimer(udpCloseWait)
	select {
	case <-l.gone:
	case <-t.C:
	}
	t.Stop()
	return l.ep.Close()
}

func (l *udpLink) closeNow() error { return l.ep.Close() }

// natIntroduce sends LiteNetLib NAT introduce requests for token from the
// link's socket (as PurrNet does, every 500 ms) until the relay answers
// with an introduction, and returns it.
func (l *udpLink) natIntroduce(ctx context.Context, token string) (litenet.NatPacket, error) {
	local := l.ep.LocalAddr()
	req := litenet.AppendNatRequest(nil, local, token)
	tick := time.NewTicker(natRequestWait)
	defer tick.Stop()
	for {
		if err := l.ep.WriteTo(req, l.p.Addr()); err != nil {
			return litenet.NatPacket{}, fmt.Errorf("failed to send a NAT introduce request: %w", err)
		}
		for {
			l.mu.Lock()
			for i, n := range l.nat {
				if n.Kind == litenet.NatResponse && string(n.Token) == token {
					l.nat = append(l.nat[:i], l.nat[i+1:]...)
					l.mu.Unlock()
					return n, nil
				}
			}
			l.mu.Unlock()
			select {
			case <-l.natSig:
				continue
			case <-l.gone:
				return litenet.NatPacket{}, l.endErr()
			case <-tick.C:
			case <-ctx.Done():
				return litenet.NatPacket{}, fmt.Errorf("no NAT introduction for %s: %w", token, ctx.Err())
			}
			break
		}
	}
}
