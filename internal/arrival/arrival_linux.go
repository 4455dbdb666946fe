package arrival

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Space is the control-message space one datagram's stamp takes: one
// SCM_TIMESTAMPNS message carrying a timespec.
var Space = unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{})))

// Enable asks the kernel to stamp every datagram the socket receives.
func Enable(rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return err
	}
	return serr
}

// Parse returns the stamp (Unix ns) in ctrl, the control bytes the kernel
// wrote with one datagram, or 0 when they hold none. It allocates nothing.
func Parse(ctrl []byte) int64 {
	if len(ctrl) < Space {
		return 0
	}
	m := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
	if m.Level != unix.SOL_SOCKET || m.Type != unix.SCM_TIMESTAMPNS || int(m.Len) < unix.CmsgLen(int(unsafe.Sizeof(unix.Timespec{}))) {
		return 0
	}
	return (*unix.Timespec)(unsafe.Pointer(&ctrl[unix.CmsgLen(0)])).Nano()
}
