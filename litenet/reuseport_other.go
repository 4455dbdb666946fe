//go:build !linux

package litenet

import "errors"

func setReusePort(uintptr) error {
	return errors.New("litenet: several sockets per port need Linux (SO_REUSEPORT)")
}
