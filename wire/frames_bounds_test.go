package wire

import (
	"errors"
	"testing"
)

// Rule: a pipe packet is at least its 4-byte peer id; the data may be empty.
func TestPipePacketWithEmptyData(t *testing.T) {
	id, data, err := ParsePipe([]byte{7, 0, 0, 0})
	if err != nil || id != 7 || len(data) != 0 {
		t.Fatalf("ParsePipe(4 bytes) = %d %v %v, want peer 7 with no data", id, data, err)
	}
	if _, _, err := ParsePipe([]byte{7, 0, 0}); !errors.Is(err, ErrTruncatedPacket) {
		t.Fatalf("ParsePipe(3 bytes) = %v, want truncated", err)
	}
}

// Rule: a relay -> host data packet is at least [2][sender:4]; the payload
// may be empty.
func TestToHostDataWithEmptyPayload(t *testing.T) {
	p, err := ParseToHostPacket([]byte{ToHostData, 9, 0, 0, 0})
	if err != nil || p.Type != ToHostData || len(p.IDs) != 1 || p.IDs[0] != 9 || len(p.Payload) != 0 {
		t.Fatalf("ParseToHostPacket(5-byte data) = %+v, %v; want sender 9, empty payload", p, err)
	}
	if _, err := ParseToHostPacket([]byte{ToHostData, 9, 0, 0}); !errors.Is(err, ErrTruncatedPacket) {
		t.Fatalf("ParseToHostPacket(4-byte data) = %v, want truncated", err)
	}
}
