package client

import (
	"bytes"
	"slices"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// FuzzParseEvent: the host's relay -> host packets, parsed without
// allocating. ParseEvent must agree with wire.ParseToHostPacket on every
// input: the same acceptance, error, type, ids and payload.
func FuzzParseEvent(f *testing.F) {
	for _, b := range [][]byte{
		wire.AppendConnected(nil, 1, 2, 3), wire.AppendConnected(nil, 7), wire.AppendDisconnected(nil, 7),
		wire.AppendHostData(nil, 7, []byte("hi")), wire.AppendHostData(nil, 7, nil), {wire.ToHostNATIntroduce, 't'}, {wire.ToHostNATIntroduce},
		{0}, {0, 1, 0, 0}, {1, 1}, {2, 1, 0}, {3}, {}, {9, 9},
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEvent(b)
		p, perr := wire.ParseToHostPacket(b)
		if err != perr {
			t.Fatalf("%x: ParseEvent %v, wire %v", b, err, perr)
		}
		if err != nil {
			return
		}
		ids := e.AppendIDs(nil)
		if e.Type != p.Type || !slices.Equal(ids, p.IDs) || e.Count() != len(p.IDs) || !bytes.Equal(e.Payload, p.Payload) ||
			len(ids) > 0 && e.ID != ids[0] {
			t.Fatalf("%x: event %+v (ids %v), wire %+v", b, e, ids, p)
		}
	})
}
