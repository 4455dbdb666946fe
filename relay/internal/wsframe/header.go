package wsframe

import (
	"encoding/binary"
	"math/rand/v2"
)

// Frame opcodes (RFC 6455 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
)

// maxFrameHeader is the longest unmasked frame header; maxMaskedHeader
// the longest masked one.
const (
	maxFrameHeader  = 10
	maxMaskedHeader = maxFrameHeader + 4
)

// frameHeaderLen is the length of the header of a frame carrying n bytes.
func frameHeaderLen(n int, masked bool) int {
	h := 2
	switch {
	case n > 0xffff:
		h = 10
	case n >= 126:
		h = 4
	}
	if masked {
		h += 4
	}
	return h
}

// appendFrameHeader appends the header of one unmasked, final, binary
// frame carrying n bytes (RFC 6455 section 5.2).
func appendFrameHeader(out []byte, n int) []byte {
	const finBinary = 0x80 | 0x2
	switch {
	case n < 126:
		return append(out, finBinary, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(out, finBinary, 126), uint16(n))
	}
	return binary.BigEndian.AppendUint64(append(out, finBinary, 127), uint64(n))
}

// appendMaskedHeader appends the header of one masked, final, binary frame
// carrying n bytes, with a fresh masking key, and returns the key.
//
// The key comes from math/rand/v2's global source, the runtime's
// per-thread ChaCha8 generator seeded from the operating system: no lock,
// no allocation, no per-link state, a few nanoseconds a key (coder/websocket
// reads crypto/rand for every frame). RFC 6455 section 10.3 wants keys a
// script cannot predict, so that a hostile page cannot choose the bytes an
// intermediary sees; a link runs between machines of one app over the
// private network, with no script and no intermediary, and these keys are
// unpredictable from outside the process anyway.
func appendMaskedHeader(out []byte, n int) ([]byte, [4]byte) {
	h := len(out)
	out = appendFrameHeader(out, n)
	out[h+1] |= 0x80 // MASK
	var key [4]byte
	binary.LittleEndian.PutUint32(key[:], rand.Uint32())
	return append(out, key[:]...), key
}

// maskBytes writes src XORed with key (byte i with key[i%4]) to dst, which
// must be at least as long as src; dst and src may be the same slice. It
// works 32 bytes at a time, then 8: a loop of one word per turn ran a
// quarter slower or not depending on where the linker placed it.
func maskBytes(dst, src []byte, key [4]byte) {
	k := uint64(binary.LittleEndian.Uint32(key[:]))
	k |= k << 32
	dst = dst[:len(src)]
	i := 0
	for ; len(src)-i >= 32; i += 32 {
		s, d := src[i:i+32:i+32], dst[i:i+32:i+32]
		binary.LittleEndian.PutUint64(d[0:], binary.LittleEndian.Uint64(s[0:])^k)
		binary.LittleEndian.PutUint64(d[8:], binary.LittleEndian.Uint64(s[8:])^k)
		binary.LittleEndian.PutUint64(d[16:], binary.LittleEndian.Uint64(s[16:])^k)
		binary.LittleEndian.PutUint64(d[24:], binary.LittleEndian.Uint64(s[24:])^k)
	}
	for ; len(src)-i >= 8; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k)
	}
	for ; i < len(src); i++ {
		dst[i] = src[i] ^ key[i&3]
	}
}

// Close codes the frame code sends itself (RFC 6455 7.4.1).
const (
	CloseProtocolError = 1002
	CloseTooBig        = 1009
)

// TooBigText is the text of the close frame sent for a message over the
// limit (what coder/websocket sent).
const TooBigText = "message too big"

// closeCodeAllowed reports whether a peer may send code in a close frame
// (RFC 6455 7.4.1 and 7.4.2): 1000 to 1014 less the reserved 1004 and
// the codes that stand for no frame (1005, 1006), and the 3000 to 4999
// of libraries and applications.
func closeCodeAllowed(code uint16) bool {
	switch {
	case code == 1004 || code == 1005 || code == 1006:
		return false
	case code >= 1000 && code <= 1014, code >= 3000 && code <= 4999:
		return true
	}
	return false
}
