//go:build !linux

package arrival

import (
	"errors"
	"syscall"
)

// Space is 0: no stamps here.
const Space = 0

// Enable reports errors.ErrUnsupported: the stamps are Linux's.
func Enable(syscall.RawConn) error { return errors.ErrUnsupported }

// Parse finds no stamp.
func Parse([]byte) int64 { return 0 }
