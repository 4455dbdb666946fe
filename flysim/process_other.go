//go:build unix && !linux

package flysim

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; machines still
// get their own process group.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalGroup signals the machine's whole process group.
func signalGroup(p *process, sig syscall.Signal) { _ = syscall.Kill(-p.pid, sig) }
