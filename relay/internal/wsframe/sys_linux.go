package wsframe

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysRead and sysWrite call read(2) and write(2) on a non-blocking socket
// with RawSyscall: the call cannot block, so it needs none of the
// runtime's syscall bookkeeping, whose first call after an idle spell
// wakes the runtime's monitor thread (at game rates, where each frame in
// wakes an idle relay, half the relay's context switches were that
// thread's).
func sysRead(fd uintptr, p []byte) (int, error) {
	return rawIO(unix.SYS_READ, fd, p)
}

func sysWrite(fd uintptr, p []byte) (int, error) {
	return rawIO(unix.SYS_WRITE, fd, p)
}

func rawIO(trap, fd uintptr, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(unsafe.SliceData(p))
	}
	n, _, e := unix.RawSyscall(trap, fd, uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, syscall.Errno(e)
	}
	return int(n), nil
}
