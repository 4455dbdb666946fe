package litenet

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// The capture of a real LiteNetLib 1.3.1 session (docs/LITENETLIB-1.md):
// the same script as the 2.1.2 one, server port 9051.

const capture1Time = 639320337841884670

// readCapture1 reads testdata/session-1.3.1.pcap.
func readCapture1(tb testing.TB) []captured {
	tb.Helper()
	return readPcap(tb, "testdata/session-1.3.1.pcap", 9051, 52)
}

// engine returns a copy of a 1.x datagram in the engine's numbering.
func engine(b []byte) []byte {
	b = append([]byte(nil), b...)
	FromWire(V1, b)
	return b
}

// Every client datagram of the 1.3.1 session parses as its notes say,
// once renumbered, and our encoders write the same bytes.
func TestCapture1ClientDatagramsParse(t *testing.T) {
	caps := readCapture1(t)
	for _, c := range caps {
		if !verify(engine(c.b)) {
			t.Errorf("#%d does not verify", c.n)
		}
	}
	// #1: the connect request; only byte 0 differs from 2.x.
	if caps[0].b[0] != 0x05 {
		t.Fatalf("#1 byte 0 = %#x", caps[0].b[0])
	}
	req, err := ParseConnectRequest(engine(caps[0].b))
	if err != nil {
		t.Fatal(err)
	}
	if key, err := req.Key(); err != nil || string(key) != "PurrNet" {
		t.Fatalf("key %q, %v", key, err)
	}
	if req.ConnectTime != capture1Time || req.PeerID != 0 || req.Target != netip.MustParseAddrPort("127.0.0.1:9051") {
		t.Fatalf("request %+v", req)
	}
	got := AppendConnectRequest(nil, 0, req.ConnectTime, 0, req.Target, "PurrNet")
	ToWire(V1, got)
	if !bytes.Equal(got, caps[0].b) {
		t.Fatalf("AppendConnectRequest (1.x)\n got %x\nwant %x", got, caps[0].b)
	}
	// #3: the authentication JSON as a plain Channeled packet, RO seq 0.
	if p := caps[2].b; p[0] != 0x01 || p[3] != byte(ReliableOrdered) || binary.LittleEndian.Uint16(p[1:]) != 0 ||
		string(p[4:]) != `{"roomName":"r1","clientSecret":"s","nat":false}` {
		t.Fatalf("#3 = %x", p)
	}
	// #9: three RO messages, one sequence number each, in one Merged (0x0c).
	if caps[8].b[0] != 0x0c {
		t.Fatalf("#9 byte 0 = %#x", caps[8].b[0])
	}
	subs := Packets(engine(caps[8].b))
	if len(subs) != 3 {
		t.Fatalf("#9 has %d packets", len(subs))
	}
	for i, s := range subs {
		if Property(s[0]) != PropChanneled || s[3] != byte(ReliableOrdered) || int(binary.LittleEndian.Uint16(s[1:])) != 2+i {
			t.Errorf("#9 packet %d = %x", i, s)
		}
	}
	// #16..#20: five fragments on sequences 5..9, fragment id 1.
	total := 0
	for i, c := range caps[15:20] {
		b := c.b
		if b[0] != 0x81 || int(binary.LittleEndian.Uint16(b[1:])) != 5+i || b[3] != byte(ReliableOrdered) ||
			binary.LittleEndian.Uint16(b[4:]) != 1 || int(binary.LittleEndian.Uint16(b[6:])) != i || binary.LittleEndian.Uint16(b[8:]) != 5 {
			t.Errorf("#%d fragment header %x", c.n, b[:10])
		}
		total += len(b) - fragmentedHeader
	}
	if total != 5000 {
		t.Errorf("fragments carry %d bytes", total)
	}
	// #51: Disconnect (0x07) with the connect time.
	want := AppendDisconnect(nil, 0, capture1Time)
	ToWire(V1, want)
	if !bytes.Equal(caps[50].b, want) {
		t.Errorf("#51 = %x, want %x", caps[50].b, want)
	}
}

// The 1.3.1 server's fixed answers, byte for byte from our encoders.
func TestCapture1ServerEncodings(t *testing.T) {
	caps := readCapture1(t)
	got := AppendConnectAccept(nil, capture1Time, 0, 0)
	ToWire(V1, got)
	if !bytes.Equal(got, caps[1].b) {
		t.Errorf("ConnectAccept\n got %x\nwant %x", got, caps[1].b)
	}
	if a, err := ParseConnectAccept(engine(caps[1].b)); err != nil || a.ConnectTime != capture1Time {
		t.Errorf("ParseConnectAccept %+v %v", a, err)
	}
	if !bytes.Equal(caps[51].b, []byte{0x0d}) {
		t.Errorf("ShutdownOk %x", caps[51].b)
	}
}

// Replaying the 1.3.1 client's datagrams against our 1.x server gives the
// packets the real 1.3.1 server sent: every echo a Channeled packet of
// its own sequence number (never ReliableMerged), every ack, the pongs,
// ShutdownOk.
func TestCapture1ReplayAgainstServer(t *testing.T) { replayAgainstServer(t, readCapture1(t), V1) }

// The renumbering is a bijection on the properties both versions have.
func TestV1Renumbering(t *testing.T) {
	for p := range numProps {
		if p == PropReliableMerged {
			if v1Out[p] != 0x1f {
				t.Errorf("ReliableMerged leaves 1.x as %#x", v1Out[p])
			}
			continue
		}
		if got := Property(v1In[v1Out[p]]); got != p {
			t.Errorf("%v -> %#x -> %v", p, v1Out[p], got)
		}
	}
	for w := 18; w < 32; w++ {
		if v1In[w] != 0x1f {
			t.Errorf("1.x property %d reads as %#x, want refused", w, v1In[w])
		}
	}
	// Connection number and fragment bits survive.
	if b := toV1(byte(PropChanneled) | 0x80 | 2<<5); b != 0x81|2<<5 {
		t.Errorf("fragment bits %#x", b)
	}
	if b := toV1(byte(PropAck) | 3<<5); b != 0x02|3<<5 {
		t.Errorf("ack %#x", b)
	}
}
