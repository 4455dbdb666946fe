//go:build !amd64 && !arm64

package lockrank

import (
	"runtime"
	"sync"
)

// stackBufs holds the buffers goroutine reads the goroutine's header
// into (runtime.Stack keeps a reference, so a local array would escape).
var stackBufs = sync.Pool{New: func() any { return new([64]byte) }}

// goroutine identifies the calling goroutine by its id, read from the
// header of its stack trace ("goroutine 42 [running]:"): slower than the
// g's address the assembly reads elsewhere.
func goroutine() uintptr {
	b := stackBufs.Get().(*[64]byte)
	n := runtime.Stack(b[:], false)
	var id uintptr
	for _, c := range b[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uintptr(c-'0')
	}
	stackBufs.Put(b)
	return id
}
