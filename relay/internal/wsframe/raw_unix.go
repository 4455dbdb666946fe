//go:build unix

package wsframe

import (
	"errors"
	"os"
	"syscall"
)

// rawReadSupported: conn reads the socket's descriptor itself;
// rawWriteSupported: senders write frames to it themselves (Writer.WriteDirect).
const (
	rawReadSupported  = true
	rawWriteSupported = true
)

// rawRead reads a non-blocking socket once; wouldBlock means it has
// nothing to read yet.
func rawRead(fd uintptr, p []byte) (n int, wouldBlock bool, err error) {
	for {
		n, err = sysRead(fd, p)
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

// rawWrite writes p to a non-blocking socket once: n is what it took, 0
// when it is full.
func rawWrite(fd uintptr, p []byte) (n int, err error) {
	for {
		n, err = sysWrite(fd, p)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			return 0, nil
		}
		return 0, os.NewSyscallError("write", err)
	}
}
