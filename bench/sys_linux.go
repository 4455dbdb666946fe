package bench

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel SIGKILL the child if the parent
// dies without stopping it.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// ipBindAddressNoPort is IP_BIND_ADDRESS_NO_PORT (linux/in.h), missing
// from package syscall.
const ipBindAddressNoPort = 24

// bindNoPort defers the source port choice of a bound dial to connect, so
// ports are shared across destinations as for an unbound dial.
func bindNoPort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// fdLimit is this process's open-file limit (Go raised the soft limit to
// the hard one at start; children get the same), 0 if unknown.
func fdLimit() uint64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return r.Cur
}
