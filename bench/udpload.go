package bench

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/purrfly/purrfly/internal/arrival"
	"github.com/purrfly/purrfly/wire"
)

// The UDP baseline's load. A plain echo cannot do LiteNetLib's handshake,
// so each baseline connection is a plain UDP socket of its own (as each
// LiteNetLib client has its own), connected to the echo server. A message
// is one datagram: the payload behind the bytes LiteNetLib and PurrNet
// put before it on the way into the relay (udpEchoFrame), so datagrams
// are as long as the relay's, sent and read back on the same socket. The
// kernel stamps each datagram's arrival, as on the relay load's LiteNetLib
// sockets (client.DialOptions.UDPArrivals), where the system has stamps.

// dialUDPEcho opens one baseline connection.
func dialUDPEcho(to netip.AddrPort) (*net.UDPConn, error) {
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		return nil, fmt.Errorf("failed to open a UDP socket to the echo server: %w", err)
	}
	_ = c.SetReadBuffer(udpSocketBuffer)
	_ = c.SetWriteBuffer(udpSocketBuffer)
	if rc, err := c.SyscallConn(); err == nil {
		_ = arrival.Enable(rc) // none where unsupported: the run reports read latencies only
	}
	return c, nil
}

// connectUDPEchoRoom opens a baseline room: a host socket and a socket per
// client (the ids are dummies: the echo has none).
func connectUDPEchoRoom(to netip.AddrPort, clients int) (*room, error) {
	r := &room{}
	h, err := dialUDPEcho(to)
	if err != nil {
		return r, err
	}
	r.host = conn{udp: h}
	for i := range clients {
		c, err := dialUDPEcho(to)
		if err != nil {
			return r, err
		}
		r.clients = append(r.clients, conn{udp: c})
		r.ids = append(r.ids, wire.ConnID(i+1))
	}
	return r, nil
}

// udpEchoFrame is the datagram of one baseline message sent with m and
// where its payload starts: LiteNetLib's header for m (lnlHeader), then
// PurrNet's framing as the relay reads it, a client's [method] or, for a
// host's message (sendOne), SEND_ONE's [1][target:4][method].
func udpEchoFrame(m wire.Delivery, sendOne bool, size int) (frame []byte, off int) {
	frame = lnlHeader(m)
	payload := make([]byte, size)
	if sendOne {
		frame = wire.AppendSendOneUDP(frame, 1, m, payload)
	} else {
		frame = wire.AppendClientUDP(frame, m, payload)
	}
	return frame, len(frame) - size
}

// addUDPEcho wires one room of the UDP baseline: whoever sends to the
// relay sends the same-sized datagrams to the echo server and reads them
// back on its own socket.
func (tr *traffic) addUDPEcho(r *room, fanIn, fanOut bool) {
	if fanIn {
		for _, c := range r.clients {
			u := c.udp
			f, off := udpEchoFrame(tr.o.method, false, tr.o.Size)
			tr.addSender(f, off, 1, func(f []byte) error { _, err := u.Write(f); return err })
			tr.addReceiver(udpRecv(u, off))
		}
	}
	if fanOut {
		u := r.host.udp
		f, off := udpEchoFrame(tr.o.method, true, tr.o.Size)
		tr.addSender(f, off, len(r.clients), func(f []byte) error { _, err := u.Write(f); return err })
		tr.addReceiver(udpRecv(u, off))
	}
}

// udpRecv reads one echoed datagram and returns its payload (nil for one
// shorter than the header) and its arrival stamp, if it has one.
func udpRecv(u *net.UDPConn, skip int) func([]byte) ([]byte, time.Time, error) {
	oob := make([]byte, arrival.Space)
	return func(buf []byte) ([]byte, time.Time, error) {
		n, oobn, _, _, err := u.ReadMsgUDPAddrPort(buf, oob)
		if err != nil || n < skip {
			return nil, time.Time{}, err
		}
		var at time.Time
		if ns := arrival.Parse(oob[:oobn]); ns != 0 {
			at = time.Unix(0, ns)
		}
		return buf[skip:n], at, nil
	}
}
