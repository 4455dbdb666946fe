//go:build unix

package relay

import (
	"errors"
	"os"
	"syscall"
)

// rawReadSupported: readConn reads the socket's descriptor itself.
const rawReadSupported = true

// rawRead reads a non-blocking socket once; wouldBlock means it has
// nothing to read yet.
func rawRead(fd uintptr, p []byte) (n int, wouldBlock bool, err error) {
	for {
		n, err = syscall.Read(int(fd), p)
		switch {
		case err == nil:
			return n, false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			return 0, true, nil
		}
		return 0, false, os.NewSyscallError("read", err)
	}
}
