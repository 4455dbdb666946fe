//go:build unix && !linux

package wsframe

import "syscall"

// sysRead and sysWrite: the runtime's own calls (sys_linux.go says why
// Linux makes them raw).
func sysRead(fd uintptr, p []byte) (int, error)  { return syscall.Read(int(fd), p) }
func sysWrite(fd uintptr, p []byte) (int, error) { return syscall.Write(int(fd), p) }
