//go:build linux

package litenet

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsgWriter writes a batch of datagrams with one sendmmsg. Like the
// reader (recv_linux.go) it calls the kernel with RawSyscall6 through the
// socket's RawConn: the socket is non-blocking, so the call never blocks
// (a full send buffer is EAGAIN, and the runtime's poller parks the
// goroutine until the socket is writable), and skipping the runtime's
// syscall bookkeeping spares the monitor thread's wake-up (doc.go, System
// calls). golang.org/x/net's WriteBatch makes the same call through the
// bookkept path, so the batch is written here.
//
// Owned by whoever holds the socket's flushMu.
type mmsgWriter struct {
	rc syscall.RawConn
	v6 bool // an AF_INET6 socket: every address goes as sockaddr_in6
	mmsgs
	n, k  int // datagrams asked for, written
	errno syscall.Errno
	fn    func(fd uintptr) bool // built once: a closure per call would allocate
}

func newWriter(c *net.UDPConn) (*mmsgWriter, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &mmsgWriter{rc: rc, mmsgs: newMmsgs(batchSize)}
	var domain int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		domain, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	w.v6 = domain == unix.AF_INET6
	w.fn = w.send
	return w, nil
}

// write sends bufs[i] to addrs[i]; it returns how many were written (the
// first ones), and the error that stopped the rest.
func (w *mmsgWriter) write(bufs [][]byte, addrs []netip.AddrPort) (int, error) {
	n := min(len(bufs), len(w.hdrs))
	for i := range n {
		b := bufs[i]
		w.iovs[i].Base = unsafe.SliceData(b)
		w.iovs[i].SetLen(len(b))
		w.hdrs[i].Hdr.Namelen = w.putAddr(i, addrs[i])
		w.hdrs[i].Len = 0
	}
	w.n, w.k, w.errno = n, 0, 0
	if err := w.rc.Write(w.fn); err != nil {
		return 0, err
	}
	if w.errno != 0 {
		return w.k, w.errno
	}
	return w.k, nil
}

// putAddr writes a as the i-th sockaddr and returns its length. An IPv6
// address on an IPv4 socket (no peer has one) goes as sockaddr_in6, for
// the kernel to refuse, rather than panic here.
func (w *mmsgWriter) putAddr(i int, a netip.AddrPort) uint32 {
	sa := (*[unix.SizeofSockaddrInet6]byte)(unsafe.Pointer(&w.names[i]))
	binary.BigEndian.PutUint16(sa[2:4], a.Port())
	if w.v6 || !a.Addr().Unmap().Is4() {
		w.names[i].Family = unix.AF_INET6
		w.names[i].Flowinfo, w.names[i].Scope_id = 0, 0
		w.names[i].Addr = a.Addr().As16()
		return unix.SizeofSockaddrInet6
	}
	w.names[i].Family = unix.AF_INET
	*(*[4]byte)(sa[4:8]) = a.Addr().Unmap().As4()
	return unix.SizeofSockaddrInet4
}

func (w *mmsgWriter) send(fd uintptr) bool {
	var ok bool
	w.k, w.errno, ok = w.call(unix.SYS_SENDMMSG, fd, w.n)
	return ok // false: full, park until writable
}
