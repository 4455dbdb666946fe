package wire

import (
	"bytes"
	"errors"
	"testing"
)

// Relay frames (docs/PROTOCOL.md section 2). Each parser refuses with one of
// the frame errors and nothing else, and what it accepts re-encodes with
// the Append* functions to exactly the input bytes.

func frameSeeds(f *testing.F) {
	for _, b := range [][]byte{
		{0}, {1, 2, 0, 0, 0, 'h', 'i'}, {1, 2, 0, 0, 0}, {2, 7, 0, 0, 0}, {2, 7, 0, 0, 0, 1},
		{0, 1, 0, 0, 0, 2, 0, 0, 0}, {1, 9, 0, 0, 0}, {2, 9, 0, 0, 0, 'x', 'y'}, {6, 't', 'o', 'k'},
		{3}, {4}, {5, 1, 0, 0, 0}, {}, {1, 2}, {0xff, 0xff, 0xff, 0xff, 0x7f},
	} {
		f.Add(b)
	}
}

func frameError(err error) bool {
	return errors.Is(err, ErrEmptyPacket) || errors.Is(err, ErrTruncatedPacket) || errors.Is(err, ErrUnknownPacket)
}

// FuzzParseHostPacket: host -> relay packets (keepalive, SEND_ONE, KICK).
func FuzzParseHostPacket(f *testing.F) {
	frameSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseHostPacket(b)
		if err != nil {
			if !frameError(err) {
				t.Fatalf("error %v", err)
			}
			return
		}
		var again []byte
		switch p.Type {
		case HostKeepAlive:
			// [0] and anything after it is a keepalive: only its type byte counts.
			if b[0] != HostKeepAlive || p.Payload != nil {
				t.Fatalf("keepalive %+v from %x", p, b)
			}
			return
		case HostSendOne:
			again = AppendSendOne(nil, p.Target, p.Payload)
		case HostKick:
			again = AppendKick(nil, p.Target)
		default:
			t.Fatalf("accepted type %d", p.Type)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("round trip %x -> %+v -> %x", b, p, again)
		}
	})
}

// FuzzParseToHostPacket: relay -> host packets, as clients read them.
func FuzzParseToHostPacket(f *testing.F) {
	frameSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseToHostPacket(b)
		if err != nil {
			if !frameError(err) {
				t.Fatalf("error %v", err)
			}
			return
		}
		var again []byte
		switch p.Type {
		case ToHostConnected:
			again = AppendConnected(nil, p.IDs...)
		case ToHostDisconnected:
			again = AppendDisconnected(nil, p.IDs[0])
		case ToHostData:
			again = AppendHostData(nil, p.IDs[0], p.Payload)
		case ToHostNATIntroduce:
			again = append([]byte{ToHostNATIntroduce}, p.Payload...)
		default:
			t.Fatalf("accepted type %d", p.Type)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("round trip %x -> %+v -> %x", b, p, again)
		}
	})
}

// FuzzParsePipe: pipe packets, [peer:4][data] both ways.
func FuzzParsePipe(f *testing.F) {
	frameSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		id, data, err := ParsePipe(b)
		if err != nil {
			if !errors.Is(err, ErrTruncatedPacket) || len(b) >= 4 {
				t.Fatalf("refused %x: %v", b, err)
			}
			return
		}
		if again := AppendPipe(nil, id, data); !bytes.Equal(again, b) {
			t.Fatalf("round trip %x -> %d %x -> %x", b, id, data, again)
		}
	})
}
