// Package randid makes the random identifiers purrfly's services and tests
// need (boot ids, epochs, incarnations, room secrets, machine ids, lease
// nonces): n bytes of crypto/rand as lower-case hex, written once.
package randid

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns n random bytes as 2n lower-case hex digits.
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
