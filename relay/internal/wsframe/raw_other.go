//go:build !unix

package wsframe

import "errors"

// rawReadSupported, rawWriteSupported: elsewhere conn reads through
// net.Conn and every frame goes through the writer.
const (
	rawReadSupported  = false
	rawWriteSupported = false
)

func rawRead(uintptr, []byte) (int, bool, error) {
	return 0, false, errors.ErrUnsupported
}

func rawWrite(uintptr, []byte) (int, error) {
	return 0, errors.ErrUnsupported
}
