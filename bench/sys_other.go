//go:build !linux

package bench

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal: only Linux has it; the child still exits when its
// stdin closes.
func setParentDeathSignal(*exec.Cmd) {}

// bindNoPort: IP_BIND_ADDRESS_NO_PORT is Linux only.
func bindNoPort(_, _ string, _ syscall.RawConn) error { return nil }

func fdLimit() uint64 { return 0 }
