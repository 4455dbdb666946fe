//go:build !linux

package litenet

import (
	"net"
	"net/netip"
)

// udpWriter writes a batch one datagram at a time (sendmmsg is Linux's).
type udpWriter struct{ c *net.UDPConn }

func newWriter(c *net.UDPConn) (*udpWriter, error) { return &udpWriter{c: c}, nil }

func (w *udpWriter) write(bufs [][]byte, addrs []netip.AddrPort) (int, error) {
	for i, b := range bufs {
		if _, err := w.c.WriteToUDPAddrPort(b, addrs[i]); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}
