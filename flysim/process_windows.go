package flysim

import "syscall"

// On Windows flysim builds (so purrctl does) but is not a faithful host:
// there are no process groups or signals, so every stop is a kill.
var signals = map[string]syscall.Signal{
	"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT,
	"SIGKILL": syscall.SIGKILL, "SIGUSR1": syscall.Signal(0x1e), "SIGUSR2": syscall.Signal(0x1f),
	"SIGTERM": syscall.SIGTERM,
}

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *process, sig syscall.Signal) { _ = p.cmd.Process.Kill() }
