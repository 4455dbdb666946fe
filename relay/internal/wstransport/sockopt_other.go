//go:build !linux

package wstransport

import "syscall"

// linkSocketControl is a no-op where TCP_USER_TIMEOUT does not exist; mesh
// links then rely on keepalive and the queue bounds.
func linkSocketControl(_, _ string, _ syscall.RawConn) error { return nil }
