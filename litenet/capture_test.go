package litenet

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"testing"
)

// The capture of a real LiteNetLib 2.1.2 session (docs/LITENETLIB-VECTORS.md):
// a client set up as PurrNet sets it up, against a server that echoes every
// message with its delivery method. Server port 9050.

type captured struct {
	n        int // datagram number, 1-based as in VECTORS.md
	toServer bool
	b        []byte
}

// readCapture reads testdata/session-2.1.2.pcap (classic pcap, Ethernet,
// IPv4, UDP).
func readCapture(tb testing.TB) []captured {
	tb.Helper()
	return readPcap(tb, "testdata/session-2.1.2.pcap", 9050, 54)
}

// readPcap reads a capture of want datagrams whose server port is port.
func readPcap(tb testing.TB, name string, port uint16, want int) []captured {
	tb.Helper()
	d, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	if binary.LittleEndian.Uint32(d) != 0xa1b2c3d4 || binary.LittleEndian.Uint32(d[20:]) != 1 {
		tb.Fatal("not a little-endian Ethernet pcap")
	}
	var out []captured
	for off := 24; off+16 <= len(d); {
		incl := int(binary.LittleEndian.Uint32(d[off+8:]))
		frame := d[off+16 : off+16+incl]
		off += 16 + incl
		ip := frame[14:]
		ihl := int(ip[0]&0x0f) * 4
		udp := ip[ihl:]
		dport := binary.BigEndian.Uint16(udp[2:])
		ulen := int(binary.BigEndian.Uint16(udp[4:]))
		out = append(out, captured{n: len(out) + 1, toServer: dport == port, b: udp[8:ulen]})
	}
	if len(out) != want {
		tb.Fatalf("%s has %d datagrams, its notes list %d", name, len(out), want)
	}
	return out
}

// Every client datagram parses as the capture's notes say.
func TestCaptureClientDatagramsParse(t *testing.T) {
	caps := readCapture(t)
	for _, c := range caps {
		if !verify(c.b) {
			t.Errorf("#%d does not verify", c.n)
		}
	}
	// #1: the connect request.
	req, err := ParseConnectRequest(caps[0].b)
	if err != nil {
		t.Fatal(err)
	}
	key, err := req.Key()
	if err != nil || string(key) != "PurrNet" {
		t.Fatalf("key %q, %v", key, err)
	}
	if req.ConnectTime != 639317087511840140 || req.PeerID != 0 || req.ConnNum != 0 ||
		req.Target != netip.MustParseAddrPort("127.0.0.1:9050") {
		t.Fatalf("request %+v", req)
	}
	// Our encoder writes the same bytes.
	if got := AppendConnectRequest(nil, 0, req.ConnectTime, 0, req.Target, "PurrNet"); !bytes.Equal(got, caps[0].b) {
		t.Fatalf("AppendConnectRequest\n got %x\nwant %x", got, caps[0].b)
	}
	// #3: the authentication JSON in a ReliableMerged container, RO.
	p := caps[2].b
	if Property(p[0]) != PropReliableMerged || p[3] != byte(ReliableOrdered) || binary.LittleEndian.Uint16(p[1:]) != 0 {
		t.Fatalf("#3 header %x", p[:4])
	}
	if msg := p[6:]; string(msg) != `{"roomName":"r1","clientSecret":"s","nat":false}` || int(binary.LittleEndian.Uint16(p[4:])) != len(msg) {
		t.Fatalf("#3 payload %q", msg)
	}
	// #7: Merged with five sub-packets, one per method.
	subs := packets(caps[6].b)
	wantSubs := []struct {
		prop Property
		ch   byte
	}{{PropReliableMerged, 0}, {PropChanneled, 1}, {PropReliableMerged, 2}, {PropChanneled, 3}, {PropUnreliable, 0}}
	if len(subs) != len(wantSubs) {
		t.Fatalf("#7 has %d sub-packets", len(subs))
	}
	for i, w := range wantSubs {
		if Property(subs[i][0]&0x1f) != w.prop || w.prop != PropUnreliable && subs[i][3] != w.ch {
			t.Errorf("#7 sub-packet %d = %x", i, subs[i])
		}
	}
	// #19..#23: five fragments of one 5,000-byte RO message.
	total := 0
	for i, c := range caps[18:23] {
		b := c.b
		if b[0] != 0x81 || b[3] != byte(ReliableOrdered) || binary.LittleEndian.Uint16(b[4:]) != 1 ||
			int(binary.LittleEndian.Uint16(b[6:])) != i || binary.LittleEndian.Uint16(b[8:]) != 5 {
			t.Errorf("#%d fragment header %x", c.n, b[:10])
		}
		total += len(b) - fragmentedHeader
	}
	if total != 5000 {
		t.Errorf("fragments carry %d bytes", total)
	}
	// #53: Disconnect with the connect time.
	if d := caps[52].b; !bytes.Equal(d, AppendDisconnect(nil, 0, req.ConnectTime)) {
		t.Errorf("#53 = %x", d)
	}
}

// The capture's fixed answers, byte for byte from our encoders.
func TestCaptureServerEncodings(t *testing.T) {
	caps := readCapture(t)
	if got := AppendConnectAccept(nil, 639317087511840140, 0, 0); !bytes.Equal(got, caps[1].b) {
		t.Errorf("ConnectAccept\n got %x\nwant %x", got, caps[1].b)
	}
	a, err := ParseConnectAccept(caps[1].b)
	if err != nil || a.ConnectTime != 639317087511840140 || a.ConnNum != 0 || a.Reused || a.PeerID != 0 {
		t.Errorf("ParseConnectAccept %+v %v", a, err)
	}
	if !bytes.Equal(caps[53].b, shutdownOk) {
		t.Errorf("ShutdownOk %x", caps[53].b)
	}
}

// Replaying the client's datagrams against our server gives the packets the
// real server sent (pings aside, which each side times on its own): the
// accept (but for the server's peer id), every ack, the echoes with the server's own sequence numbers,
// the pong to the client's ping, and ShutdownOk. Our server merges an ack
// with the echo it sends in the same flush, where the real one sent two
// datagrams; the packets are the same.
func TestCaptureReplayAgainstServer(t *testing.T) { replayAgainstServer(t, readCapture(t), V2) }

// replayAgainstServer replays a capture's client datagrams against our
// server speaking v and compares what it sends with what the real server
// sent, packet by packet (both read in the engine's numbering).
func replayAgainstServer(t *testing.T, caps []captured, v Version) {
	clk := fakeClock()
	e := listen(t, Config{Handler: newRecorder(true), Clock: clk, Version: v})
	raw := newRaw(t, e.LocalAddr())
	packets := func(b []byte) [][]byte {
		b = append([]byte(nil), b...)
		FromWire(v, b)
		return Packets(b)
	}

	// What the real server sent, as packets, Pings dropped and Pongs cut to
	// their sequence number (the rest is the server's clock).
	var want [][]byte
	for _, c := range caps {
		if c.toServer {
			continue
		}
		for _, p := range packets(c.b) {
			switch Property(p[0] & 0x1f) {
			case PropPing:
				continue
			case PropPong:
				p = p[:3]
			case PropConnectAccept:
				p = maskPeerID(p)
			}
			want = append(want, p)
		}
	}

	var got [][]byte
	var lastPing []byte // the server's latest ping: a real client's pong names it
	take := func(b []byte) {
		for _, p := range packets(b) {
			switch Property(p[0] & 0x1f) {
			case PropPing:
				lastPing = append([]byte(nil), p...)
				continue
			case PropPong:
				if ticks := int64(binary.LittleEndian.Uint64(p[3:])); ticks != Ticks(clk.Now()) {
					t.Errorf("pong time %d, want the server's clock %d", ticks, Ticks(clk.Now()))
				}
				p = p[:3]
			case PropConnectAccept:
				p = maskPeerID(p)
			}
			got = append(got, append([]byte(nil), p...))
		}
	}
	for i, c := range caps {
		if !c.toServer {
			continue
		}
		b := c.b
		if q := append([]byte(nil), b...); lastPing != nil {
			// The client's pong answers our ping, whose sequence is our
			// own (random: it proves the client's address, reflect.go).
			FromWire(v, q)
			if Property(q[0]&0x1f) == PropPong {
				copy(q[1:3], lastPing[1:3])
				ToWire(v, q)
				b = q
			}
		}
		raw.send(b)
		if i+1 < len(caps) && caps[i+1].toServer {
			continue // sent in one burst by the client: answered as one
		}
		// Answers come at once (data, pongs) or with the next tick (acks
		// alone): read what is there, then tick the clock and read again.
		for {
			b := raw.recv(100e6)
			if b == nil {
				break
			}
			take(b)
		}
		advance(t, clk, DefaultTick, e)
		for {
			b := raw.recv(50e6)
			if b == nil {
				break
			}
			take(b)
		}
	}
	if !samePackets(got, want) {
		t.Errorf("server packets differ from the capture's\n got:\n%s\nwant:\n%s", dump(got), dump(want))
	}
}

// maskPeerID zeroes an accept's peer id: the server's own choice (ours is
// a cookie, accept.go); every other byte is determined by the request.
func maskPeerID(p []byte) []byte {
	q := append([]byte(nil), p...)
	clear(q[11:15])
	return q
}

// samePackets compares two lists of packets as multisets.
func samePackets(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
outer:
	for _, x := range a {
		for i, y := range b {
			if !used[i] && bytes.Equal(x, y) {
				used[i] = true
				continue outer
			}
		}
		return false
	}
	return true
}

func dump(ps [][]byte) string {
	var s string
	for _, p := range ps {
		if len(p) > 24 {
			s += hex.EncodeToString(p[:24]) + "...\n"
		} else {
			s += hex.EncodeToString(p) + "\n"
		}
	}
	return s
}
