//go:build amd64 || arm64

package lockrank

// goroutine identifies the calling goroutine: the address of its runtime
// g, read from the register or thread-local slot the runtime keeps it in
// (goroutine_amd64.s, goroutine_arm64.s). A g is reused once its
// goroutine has ended, by when that goroutine holds no lock.
func goroutine() uintptr
