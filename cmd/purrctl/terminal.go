package main

import (
	"io"
	"os"
)

// terminal opens the process's controlling terminal for writing: what
// an operator at that terminal sees, whatever stdout and stderr were
// redirected to (a log file, a collector). ok is false when there is none
// (a service manager, a CI job, a Fly machine).
func terminal() (w io.WriteCloser, ok bool) {
	f, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return nil, false
	}
	return f, true
}
