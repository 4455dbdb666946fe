//go:build !unix

package wstransport

import (
	"errors"
	"syscall"
)

// canCapSocketBuffers says capSocketBuffer works here: the tests that need
// a known socket buffer skip.
const canCapSocketBuffers = false

const (
	soSndBuf = 0
	soRcvBuf = 0
)

func capSocketBuffer(syscall.RawConn, int, int) error {
	return errors.New("socket buffers cannot be capped on this platform")
}
