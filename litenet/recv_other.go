//go:build !linux

package litenet

import (
	"net"
	"net/netip"
)

// udpReader reads one datagram per call (recvmmsg is Linux's).
type udpReader struct {
	c    *net.UDPConn
	buf  []byte
	n    int
	from netip.AddrPort
}

func newReader(c *net.UDPConn, _ bool, _ int) (datagramReader, error) {
	return &udpReader{c: c, buf: make([]byte, readBufSize)}, nil
}

func (r *udpReader) read() (int, error) {
	n, _, flags, from, err := r.c.ReadMsgUDPAddrPort(r.buf, nil)
	if err != nil {
		return 0, err
	}
	_ = flags
	r.n, r.from = n, netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	return 1, nil
}

func (r *udpReader) datagram(int) (netip.AddrPort, []byte, bool) {
	if r.n > len(r.buf)-1 {
		return netip.AddrPort{}, nil, false // possibly truncated
	}
	return r.from, r.buf[:r.n], true
}

func (r *udpReader) arrival(int) int64 { return 0 } // Config.Arrivals is Linux's
