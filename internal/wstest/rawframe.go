package wstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// RawFrame is one WebSocket frame as read off the wire by a test peer.
type RawFrame struct {
	Fin     bool
	Op      byte
	Masked  bool
	Payload []byte // unmasked
}

// ReadRawFrame reads one frame from r and unmasks its payload byte by byte
// (the RFC's definition, independent of the relay's masking code).
func ReadRawFrame(r io.Reader) (RawFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return RawFrame{}, err
	}
	f := RawFrame{Fin: h[0]&0x80 != 0, Op: h[0] & 0x0f, Masked: h[1]&0x80 != 0}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return f, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return f, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	if n > 1<<20 {
		return f, fmt.Errorf("frame of %d bytes", n)
	}
	var key [4]byte
	if f.Masked {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return f, err
		}
	}
	f.Payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		return f, err
	}
	for i := range f.Payload {
		f.Payload[i] ^= key[i%4]
	}
	return f, nil
}

// MaskedFrame is one final binary client frame carrying p (< 126 bytes).
func MaskedFrame(p []byte) []byte {
	key := [4]byte{1, 2, 3, 4}
	f := append([]byte{0x82, 0x80 | byte(len(p))}, key[:]...)
	for i, b := range p {
		f = append(f, b^key[i%4])
	}
	return f
}

// IsReset reports whether err is a socket error other than a timeout (a
// reset or a use of a closed connection): how a raw peer's read ends when
// the relay drops the socket.
func IsReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
