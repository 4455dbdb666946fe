package wstransport

import (
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLinkSocketsGiveUpOnADeadHolder: a mesh link's socket carries
// TCP_USER_TIMEOUT of linkUserTimeout, so unacknowledged data to a holder
// that vanished fails the link in seconds, not after the kernel's minutes
// of retransmissions.
func TestLinkSocketsGiveUpOnADeadHolder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := (&net.Dialer{Control: linkSocketControl}).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if want := int(linkUserTimeout.Milliseconds()); got != want {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, want %d", got, want)
	}
}
