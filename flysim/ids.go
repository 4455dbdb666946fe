package flysim

import (
	"github.com/purrfly/purrfly/internal/randid"

	"crypto/rand"
	"encoding/binary"
	"time"
)

// newMachineID returns 14 lower-case hex characters, the shape of a Fly
// machine id (e.g. 148e21dad76789).
func newMachineID() string { return randid.Hex(7) }

// newNonce returns a lease nonce (Fly's are 12 hex bytes; the value is opaque).
func newNonce() string { return randid.Hex(12) }

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newULID returns a 26-character ULID (48-bit millisecond time, 80 random
// bits), the shape of Fly's machine versions and instance ids.
func newULID(now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	// 128 bits -> 26 base32 characters, most significant first.
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	out := make([]byte, 26)
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}
