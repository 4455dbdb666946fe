//go:build !unix

package relay

import "errors"

// rawReadSupported: elsewhere readConn reads through net.Conn.
const rawReadSupported = false

func rawRead(uintptr, []byte) (int, bool, error) {
	return 0, false, errors.ErrUnsupported
}
