package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
)

// The UDP runs' baseline: a plain Go UDP echo server. One goroutine reads
// a datagram into its one buffer (ReadFromUDPAddrPort) and writes it back
// to the sender (WriteToUDPAddrPort): one read and one write system call
// per datagram, no allocation. One socket and one goroutine, because the
// relay child serves LiteNetLib from one socket with one reader
// (relay.Options.UDPSockets defaults to 1; litenet's second goroutine per
// socket, the flusher, runs timers and writes only what the reader left).
// A plain echo cannot answer LiteNetLib's handshake, so the baseline's
// load speaks plain UDP (udpload.go).

// udpSocketBuffer is the receive and send buffer of the echo's socket and
// of the baseline load's sockets: what litenet asks for its own sockets
// (SO_RCVBUF and SO_SNDBUF, 4 MiB each), so both sides drop alike.
const udpSocketBuffer = 4 << 20

func serveUDPEcho(ctx context.Context, stdout io.Writer, log *slog.Logger) error {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0)))
	if err != nil {
		return fmt.Errorf("failed to listen: %w", err)
	}
	_ = c.SetReadBuffer(udpSocketBuffer)
	_ = c.SetWriteBuffer(udpSocketBuffer)
	errc := make(chan error, 1)
	go func() { errc <- udpEchoLoop(c, log) }()
	if err := printReady(stdout, "udp://"+c.LocalAddr().String()); err != nil {
		c.Close()
		<-errc
		return err
	}
	select {
	case <-ctx.Done():
		c.Close()
		<-errc
		return nil
	case err := <-errc:
		c.Close()
		return fmt.Errorf("UDP echo server stopped: %w", err)
	}
}

// udpEchoLoop echoes datagrams until c is closed (nil) or a read fails. A
// failed write (a load socket already gone) loses that datagram only.
func udpEchoLoop(c *net.UDPConn, log *slog.Logger) error {
	buf := make([]byte, maxDatagram)
	for {
		rerr, werr := echoDatagram(c, buf)
		switch {
		case errors.Is(rerr, net.ErrClosed):
			return nil
		case rerr != nil:
			return fmt.Errorf("failed to read a datagram: %w", rerr)
		case werr != nil:
			log.Debug("UDP echo write failed", "err", werr)
		}
	}
}

// echoDatagram reads one datagram into buf and writes it back to its
// sender. It allocates nothing.
func echoDatagram(c *net.UDPConn, buf []byte) (rerr, werr error) {
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		return err, nil
	}
	_, err = c.WriteToUDPAddrPort(buf[:n], from)
	return nil, err
}

// udpURLAddr is the address of a UDP echo child's udp://ip:port URL.
func udpURLAddr(raw string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(strings.TrimPrefix(raw, "udp://"))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("failed to parse the UDP echo server's address %q: %w", raw, err)
	}
	return ap, nil
}
