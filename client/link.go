package client

import (
	"context"
	"errors"
	"sync"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// Transport is how a connection reaches the relay.
type Transport uint8

const (
	// TransportWebSocket: ws(s)://host:port, as PurrNet's WebGL builds.
	TransportWebSocket Transport = iota
	// TransportUDP: LiteNetLib 2.x to host:udpPortV2, as PurrNet's
	// desktop, mobile and Editor builds (udp.go).
	TransportUDP
	// TransportUDP1: LiteNetLib 1.x to host:udpPort, as PurrNet builds
	// made before its move to LiteNetLib 2.x connect.
	TransportUDP1
)

func (t Transport) String() string {
	switch t {
	case TransportUDP:
		return "udp"
	case TransportUDP1:
		return "udp1"
	}
	return "ws"
}

// UDP reports whether t is LiteNetLib (either version): PurrNet's UDP
// framing and delivery methods apply.
func (t Transport) UDP() bool { return t == TransportUDP || t == TransportUDP1 }

// version is the LiteNetLib wire version of a UDP transport.
func (t Transport) version() litenet.Version {
	if t == TransportUDP1 {
		return litenet.V1
	}
	return litenet.V2
}

// ParseTransport reads "ws", "udp" (LiteNetLib 2.x) or "udp1" (1.x).
func ParseTransport(s string) (Transport, bool) {
	switch s {
	case "ws", "websocket":
		return TransportWebSocket, true
	case "udp", "udp2":
		return TransportUDP, true
	case "udp1":
		return TransportUDP1, true
	}
	return 0, false
}

// link is one relay connection's transport. Over WebSocket every message
// is reliable and ordered and the delivery method is ignored; over UDP it
// picks the LiteNetLib method and PurrNet's UDP framing applies
// (wire/udp.go). Writes may run concurrently with each other and with one
// reader; close and closeNow may be called at any time.
type link interface {
	write(ctx context.Context, d wire.Delivery, b []byte) error
	read(ctx context.Context) (wire.Delivery, []byte, error)
	readInto(ctx context.Context, buf []byte) (wire.Delivery, int, error)
	close() error
	closeNow() error
	udp() bool
}

// wsLink is a WebSocket link.
type wsLink struct{ ws *websocket.Conn }

func (l wsLink) write(ctx context.Context, _ wire.Delivery, b []byte) error {
	return l.ws.Write(ctx, websocket.MessageBinary, b)
}

func (l wsLink) read(ctx context.Context) (wire.Delivery, []byte, error) {
	b, err := readMessage(ctx, l.ws)
	return wire.ReliableOrdered, b, err
}

func (l wsLink) readInto(ctx context.Context, buf []byte) (wire.Delivery, int, error) {
	n, err := readInto(ctx, l.ws, buf)
	return wire.ReliableOrdered, n, err
}

func (l wsLink) close() error    { return closeWS(l.ws) }
func (l wsLink) closeNow() error { return closeNow(l.ws) }
func (l wsLink) udp() bool       { return false }

func transportOf(l link) Transport {
	if u, ok := l.(*udpLink); ok {
		return u.tr
	}
	if l.udp() {
		return TransportUDP
	}
	return TransportWebSocket
}

func rawOf(l link) *Raw {
	if w, ok := l.(wsLink); ok {
		return &Raw{ws: w.ws}
	}
	return nil
}

// natIntroduce runs a NAT introduction request over a UDP link.
func natIntroduce(ctx context.Context, l link, token string) (litenet.NatPacket, error) {
	u, ok := l.(*udpLink)
	if !ok {
		return litenet.NatPacket{}, errors.New("NAT introduction needs a UDP connection")
	}
	return u.natIntroduce(ctx, token)
}

// framePool holds write buffers so that a framed send does not allocate.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeFramed builds one packet with build into a pooled buffer and writes
// it on l with d.
func writeFramed(ctx context.Context, l link, d wire.Delivery, build func(dst []byte) []byte) error {
	bp := framePool.Get().(*[]byte)
	b := build((*bp)[:0])
	err := l.write(ctx, d, b)
	*bp = b[:0]
	framePool.Put(bp)
	return err
}
