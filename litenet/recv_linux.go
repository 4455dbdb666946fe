//go:build linux

package litenet

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/purrfly/purrfly/internal/arrival"
)

// mmsgReader reads up to a batch of datagrams per system call with
// recvmmsg. golang.org/x/net's ReadBatch does the same but allocates a
// net.UDPAddr (and its IP) for every datagram; on the forwarding path the
// relay allocates nothing, so the receive side calls recvmmsg itself
// through the socket's RawConn (the runtime's poller still parks the
// goroutine while the socket is empty), as RawSyscall6 (doc.go, System
// calls). Sending is send_linux.go's.
//
// Owned by the socket's reader goroutine.
type mmsgReader struct {
	rc syscall.RawConn
	mmsgs
	bufs  [][]byte
	ctrl  []byte // with arrival stamps: arrival.Space bytes of control message per header
	n     int    // datagrams the last call read
	dirty int    // headers the last call filled, to reset before the next
	errno syscall.Errno
	fn    func(fd uintptr) bool // built once: a closure per call would allocate
}

// mmsgs are the message headers of a recvmmsg or sendmmsg batch, each
// pointing at its own iovec (one buffer) and sockaddr.
type mmsgs struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
}

// call makes one recvmmsg or sendmmsg (trap) over the first n headers as a
// raw system call (doc.go, System calls), again on EINTR; ok is false on
// EAGAIN, for the runtime's poller to park the caller until it may retry.
func (m *mmsgs) call(trap, fd uintptr, n int) (k int, errno syscall.Errno, ok bool) {
	for {
		r, _, e := unix.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(n), 0, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, 0, false
		}
		return int(r), e, true
	}
}

func newMmsgs(n int) mmsgs {
	m := mmsgs{
		hdrs:  make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet6, n),
	}
	for i := range m.hdrs {
		m.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&m.names[i]))
		m.hdrs[i].Hdr.Iov = &m.iovs[i]
		m.hdrs[i].Hdr.SetIovlen(1)
	}
	return m
}

func newReader(c *net.UDPConn, arrivals bool, batch int) (datagramReader, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &mmsgReader{rc: rc, mmsgs: newMmsgs(batch), bufs: make([][]byte, batch)}
	if arrivals {
		if err := arrival.Enable(rc); err != nil {
			return nil, fmt.Errorf("failed to ask for arrival stamps (SO_TIMESTAMPNS): %w", err)
		}
		r.ctrl = make([]byte, batch*arrival.Space)
	}
	for i := range r.hdrs {
		r.bufs[i] = make([]byte, readBufSize)
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(readBufSize)
		if r.ctrl != nil {
			r.hdrs[i].Hdr.Control = &r.ctrl[i*arrival.Space]
		}
	}
	r.dirty = batch // all of them, once
	r.fn = r.recv
	return r, nil
}

// recv makes one recvmmsg. Of a header's fields the kernel reads only the
// name and control lengths, the sizes of the address and control
// buffers, and for each header it fills writes back the lengths it
// stored (an address is 16 bytes on an IPv4 socket, 28 on an IPv6 or
// dual-stack one, which reports IPv4 senders v4-mapped), the flags and
// the datagram's length. So only the headers the previous call filled
// (dirty) get their lengths back, and a socket read one datagram at a
// time (every client endpoint, a relay at light load) resets one header
// a call, not the whole batch.
func (r *mmsgReader) recv(fd uintptr) bool {
	for i := range r.dirty {
		r.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		if r.ctrl != nil {
			r.hdrs[i].Hdr.SetControllen(arrival.Space)
		}
	}
	var ok bool
	r.n, r.errno, ok = r.call(unix.SYS_RECVMMSG, fd, len(r.hdrs))
	r.dirty = max(r.n, 0) // -1 on an error, when none was filled
	return ok             // false: empty, park until readable
}

func (r *mmsgReader) read() (int, error) {
	r.n, r.errno = 0, 0
	if err := r.rc.Read(r.fn); err != nil {
		return 0, err
	}
	if r.errno != 0 {
		return 0, r.errno
	}
	return r.n, nil
}

// datagram returns the i-th datagram of the last read; ok is false for one
// that was truncated or came from an address family we do not serve.
func (r *mmsgReader) datagram(i int) (netip.AddrPort, []byte, bool) {
	h := &r.hdrs[i]
	if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
		return netip.AddrPort{}, nil, false
	}
	b := r.bufs[i][:h.Len]
	sa := (*[unix.SizeofSockaddrInet6]byte)(unsafe.Pointer(&r.names[i]))
	port := binary.BigEndian.Uint16(sa[2:4])
	switch r.names[i].Family {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port), b, true
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(sa[8:24])).Unmap(), port), b, true
	}
	return netip.AddrPort{}, nil, false
}

// arrival returns the kernel's stamp of the i-th datagram of the last
// read, or 0 without one.
func (r *mmsgReader) arrival(i int) int64 {
	if r.ctrl == nil {
		return 0
	}
	off := i * arrival.Space
	return arrival.Parse(r.ctrl[off : off+min(int(r.hdrs[i].Hdr.Controllen), arrival.Space)])
}
