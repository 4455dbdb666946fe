package flysim

import "syscall"

// sysProcAttr puts each machine in its own process group (so kill_signal
// reaches a shell's children too, and a Ctrl-C on the terminal reaches only
// the Sim, which then stops machines by their kill_signal) and has the kernel
// SIGKILL it if the Sim itself dies, so no machine outlives a crashed Sim.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup signals the machine's whole process group.
func signalGroup(p *process, sig syscall.Signal) {
	_ = syscall.Kill(-p.pid, sig)
}
