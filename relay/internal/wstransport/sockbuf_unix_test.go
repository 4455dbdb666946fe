//go:build unix

package wstransport

import "syscall"

// canCapSocketBuffers says capSocketBuffer works here.
const canCapSocketBuffers = true

const (
	soSndBuf = syscall.SO_SNDBUF
	soRcvBuf = syscall.SO_RCVBUF
)

// capSocketBuffer sets a socket's send (soSndBuf) or receive (soRcvBuf)
// buffer to n bytes, which the kernel doubles and then no longer grows: a
// test knows how much its loopback socket can hold.
func capSocketBuffer(c syscall.RawConn, opt, n int) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, n) }); err != nil {
		return err
	}
	return serr
}
