package wstransport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/core"
)

// TestCloseReasonsRoundTrip: a forwarded peer learns exactly the reason
// the holder closed its link with (its code and text), and an unknown
// 1012 from a holder still means "come back" (shutdown).
func TestCloseReasonsRoundTrip(t *testing.T) {
	for _, r := range []core.Reason{core.ReasonAuthFailed, core.ReasonUnsupported, core.ReasonTooBig, core.ReasonKicked,
		core.ReasonHostLeft, core.ReasonShutdown, core.ReasonRoomGone, core.ReasonSlowReceiver, core.ReasonMigrated, core.ReasonRejoin} {
		code, text := wsCode(r)
		if got := reasonOfClose(code, text); got != r {
			t.Errorf("%v closed as %d %q comes back as %v", r, code, text, got)
		}
	}
	if got := reasonOfClose(websocket.StatusServiceRestart, "something else"); got != core.ReasonShutdown {
		t.Errorf("an unknown 1012 comes back as %v, want %v", got, core.ReasonShutdown)
	}
	if got := reasonOfClose(websocket.StatusNormalClosure, "bye"); got == core.ReasonShutdown || got == core.ReasonKicked || got == core.ReasonHostLeft {
		t.Errorf("an unknown 1000 comes back as %v", got)
	}
}

// rawFrame is one WebSocket frame as read off the wire by a test peer.
type rawFrame struct {
	fin     bool
	op      byte
	masked  bool
	payload []byte // unmasked
}

// readRawFrame reads one frame from r and unmasks its payload byte by byte
// (the RFC's definition, independent of the relay's masking code).
func readRawFrame(r io.Reader) (rawFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return rawFrame{}, err
	}
	f := rawFrame{fin: h[0]&0x80 != 0, op: h[0] & 0x0f, masked: h[1]&0x80 != 0}
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
	if f.masked {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return f, err
		}
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		return f, err
	}
	for i := range f.payload {
		f.payload[i] ^= key[i%4]
	}
	return f, nil
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// maskedFrame is one final binary client frame carrying p (< 126 bytes).
func maskedFrame(p []byte) []byte {
	key := [4]byte{1, 2, 3, 4}
	f := append([]byte{0x82, 0x80 | byte(len(p))}, key[:]...)
	for i, b := range p {
		f = append(f, b^key[i%4])
	}
	return f
}
