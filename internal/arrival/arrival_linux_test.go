package arrival

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Parse agrees with a bounds-checked decoding of the same bytes: a stamp
// only from a whole SCM_TIMESTAMPNS message, never a read past the end.
func FuzzParse(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, Space))
	var msg [64]byte
	ne := binary.NativeEndian
	putLen := func(b []byte, n int) int { // the width of cmsghdr's length
		if unsafe.Sizeof(unix.Cmsghdr{}.Len) == 8 {
			ne.PutUint64(b, uint64(n))
			return 8
		}
		ne.PutUint32(b, uint32(n))
		return 4
	}
	off := putLen(msg[:], unix.CmsgLen(int(unsafe.Sizeof(unix.Timespec{}))))
	ne.PutUint32(msg[off:], unix.SOL_SOCKET)
	ne.PutUint32(msg[off+4:], unix.SCM_TIMESTAMPNS)
	ne.PutUint32(msg[unix.CmsgLen(0):], 1) // a second and change
	f.Add(msg[:Space])
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Parse(b), parseChecked(b); got != want {
			t.Fatalf("Parse(%x) = %d, want %d", b, got, want)
		}
	})
}

// parseChecked decodes a timestamp control message with encoding/binary.
func parseChecked(b []byte) int64 {
	if len(b) < Space {
		return 0
	}
	ne := binary.NativeEndian
	var n, off int
	if unsafe.Sizeof(unix.Cmsghdr{}.Len) == 8 {
		n, off = int(ne.Uint64(b)), 8
	} else {
		n, off = int(ne.Uint32(b)), 4
	}
	level, typ := int32(ne.Uint32(b[off:])), int32(ne.Uint32(b[off+4:]))
	tsLen := int(unsafe.Sizeof(unix.Timespec{}))
	if level != unix.SOL_SOCKET || typ != unix.SCM_TIMESTAMPNS || n < unix.CmsgLen(tsLen) {
		return 0
	}
	d := b[unix.CmsgLen(0):]
	if tsLen == 16 {
		return int64(ne.Uint64(d))*1e9 + int64(ne.Uint64(d[8:]))
	}
	return int64(int32(ne.Uint32(d)))*1e9 + int64(int32(ne.Uint32(d[4:])))
}
