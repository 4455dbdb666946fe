package wstransport

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// linkUserTimeout bounds how long a mesh link's unacknowledged data may
// sit in flight before the kernel drops the connection. Keepalive only
// probes an idle socket; a busy game link always has data in flight, so
// without this a holder that vanished without a reset would be noticed
// only after Linux's retransmission limit (about 15 minutes).
const linkUserTimeout = 10 * time.Second

// linkSocketControl sets TCP_USER_TIMEOUT on a mesh link's socket.
func linkSocketControl(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(linkUserTimeout/time.Millisecond))
	})
	if err != nil {
		return err
	}
	return serr
}
