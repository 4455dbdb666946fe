package litenet

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"time"
)

const wait = 2 * time.Second

func connectRequest(connNum uint8, connectTime int64, key string) []byte {
	return AppendConnectRequest(nil, connNum, connectTime, 7, netipLoop(9050), key)
}

// A repeated request gets the same accept; a newer connect time from the
// same address is a reconnection with the next connection number, the old
// connection ends (ReasonReconnect), and packets of the old number are
// ignored.
func TestConnectRepeatAndReconnect(t *testing.T) { bothVersions(t, connectRepeatAndReconnect) }

func connectRepeatAndReconnect(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	raw := newRaw(t, e.LocalAddr())

	req := connectRequest(0, 1000, "PurrNet")
	raw.send(req)
	accept := raw.mustRecv(wait)
	if len(accept) != 15 || accept[0] != byte(PropConnectAccept) {
		t.Fatalf("accept %x", accept)
	}
	a, _ := ParseConnectAccept(accept)
	if a.ConnectTime != 1000 || a.ConnNum != 0 || a.Reused {
		t.Fatalf("accept %+v", a)
	}
	raw.send(req)
	if again := raw.mustRecv(wait); !bytes.Equal(again, accept) {
		t.Fatalf("repeat answered %x, want the same accept %x", again, accept)
	}
	// Prove the connection: the server then reports it.
	raw.send([]byte{byte(PropUnreliable), 'h', 'i'})
	first := srv.waitKind(t, "connected", wait).p
	if ev := srv.waitKind(t, "recv", wait); string(ev.data) != "hi" || ev.m != Unreliable {
		t.Fatalf("recv %+v", ev)
	}
	raw.prove()

	raw.send(connectRequest(0, 2000, "PurrNet"))
	re := raw.mustRecv(wait)
	ra, err := ParseConnectAccept(re)
	if err != nil || ra.ConnectTime != 2000 || ra.ConnNum != 1 {
		t.Fatalf("reconnect accept %+v %v (%x)", ra, err, re)
	}
	if ev := srv.waitKind(t, "disconnected", wait); ev.p != first || ev.why != ReasonReconnect {
		t.Fatalf("old connection ended with %+v", ev)
	}
	// A packet with the old connection number is dropped; one with the new
	// number arrives.
	raw.send([]byte{byte(PropUnreliable), 'o', 'l', 'd'})
	raw.send([]byte{byte(PropUnreliable) | 1<<5, 'n', 'e', 'w'})
	if ev := srv.waitKind(t, "connected", wait); ev.p == first {
		t.Fatal("the reconnection reused the old peer")
	}
	if ev := srv.waitKind(t, "recv", wait); string(ev.data) != "new" {
		t.Fatalf("got %q, want only the new connection's packet", ev.data)
	}
	// An older connect time than the live one is ignored.
	raw.send(connectRequest(0, 1500, "PurrNet"))
	if b := raw.recv(200 * time.Millisecond); b != nil && Property(b[0]&0x1f) == PropConnectAccept {
		t.Fatalf("an older request was accepted: %x", b)
	}
}

// Bad requests and strangers get LiteNetLib's answers, never longer than
// what they sent (no amplification).
func TestUnknownSendersGetShortAnswers(t *testing.T) { bothVersions(t, unknownSendersGetShortAnswers) }

func unknownSendersGetShortAnswers(t *testing.T) {
	e := listen(t, Config{Handler: newRecorder(false)})
	cases := []struct {
		name string
		in   []byte
		want []byte // nil: no answer
	}{
		{"wrong key", connectRequest(0, 5, "NotPurr"), AppendDisconnect(nil, 0, 5)},
		{"wrong protocol", func() []byte {
			b := connectRequest(0, 5, "PurrNet")
			binary.LittleEndian.PutUint32(b[1:], 12)
			return b
		}(), []byte{byte(PropInvalidProtocol)}},
		{"bad address size", func() []byte {
			b := connectRequest(0, 5, "PurrNet")
			b[17] = 20
			return b
		}(), nil},
		{"truncated key", connectRequest(0, 5, "PurrNet")[:40], AppendDisconnect(nil, 0, 5)},
		{"data from a stranger", []byte{byte(PropChanneled), 0, 0, 2, 'x'}, []byte{byte(PropPeerNotFound)}},
		{"ping from a stranger", []byte{byte(PropPing), 1, 0}, []byte{byte(PropPeerNotFound)}},
		{"disconnect from a stranger", AppendDisconnect(nil, 0, 9), []byte{byte(PropShutdownOk)}},
		{"network changed from a stranger", append([]byte{byte(PropPeerNotFound)}, make([]byte, 14)...), []byte{byte(PropPeerNotFound), 1}},
		{"peer not found", []byte{byte(PropPeerNotFound)}, nil},
		{"shutdown ok", []byte{byte(PropShutdownOk)}, nil},
		{"short", []byte{byte(PropChanneled), 0}, nil},
		{"unknown property", []byte{0x1f, 1, 2, 3}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := newRaw(t, e.LocalAddr())
			raw.send(c.in)
			got := raw.recv(200 * time.Millisecond)
			if !bytes.Equal(got, c.want) {
				t.Fatalf("answer %x, want %x", got, c.want)
			}
			if len(got) > len(c.in) {
				t.Fatalf("answered %d bytes to %d", len(got), len(c.in))
			}
		})
	}
}

// A remote Disconnect is answered ShutdownOk and ends the peer; a
// Disconnect for another connect time is ignored.
func TestRemoteDisconnect(t *testing.T) { bothVersions(t, remoteDisconnect) }

func remoteDisconnect(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	raw, _ := connectRaw(t, e, srv, 77)
	raw.send(AppendDisconnect(nil, 0, 78))
	raw.send(AppendDisconnect(nil, 0, 77))
	if b := raw.mustRecv(wait); !bytes.Equal(b, shutdownOk) {
		t.Fatalf("answer %x, want ShutdownOk", b)
	}
	if ev := srv.waitKind(t, "disconnected", wait); ev.why != ReasonRemote {
		t.Fatalf("reason %v", ev.why)
	}
	deadline := time.Now().Add(wait) // wall clock: the reader forgets it just after telling the handler
	for e.Stats().Peers != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the peer is still in the table")
		}
		runtime.Gosched()
	}
}

// A garbled datagram from a connected peer is dropped and counted; the
// peer stays and its next packet arrives.
func TestGarbledDatagramKeepsPeer(t *testing.T) { bothVersions(t, garbledDatagramKeepsPeer) }

func garbledDatagramKeepsPeer(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	raw, _ := connectRaw(t, e, srv, 5)
	before := e.Stats().Malformed
	// In 1.x, with no ReliableMerged, the fourth case is a property past
	// the last, and the fragment takes sequence 0.
	merged, fragSeq := []byte{byte(PropReliableMerged), 0, 0, 2, 9, 0, 'x'}, byte(1)
	if testVersion == V1 {
		merged, fragSeq = []byte{0x1f, 0, 0, 2, 'x'}, 0
	}
	for _, g := range [][]byte{
		{byte(PropMerged), 0xff, 0xff, 1},                             // sub-packet longer than the datagram
		{byte(PropMerged), 2, 0, byte(PropChanneled), 0},              // sub-packet shorter than its header
		{byte(PropChanneled), 0xff, 0xff, 2, 'x'},                     // sequence out of range
		{byte(PropChanneled), 0, 0, 9, 'x'},                           // no such channel
		merged,                                                        // merged length past the end
		{byte(PropChanneled) | 0x80, fragSeq, 0, 2, 1, 0, 5, 0, 2, 0}, // fragment part >= total
	} {
		m := e.Stats().Malformed
		raw.send(g)
		raw.send([]byte{byte(PropUnreliable), 'a'})
		srv.waitKind(t, "recv", wait)
		if e.Stats().Malformed == m {
			t.Errorf("%x not counted as malformed", g)
		}
	}
	raw.send([]byte{byte(PropUnreliable), 'b'})
	if ev := srv.waitKind(t, "recv", wait); string(ev.data) != "b" {
		t.Fatalf("got %q", ev.data)
	}
	if e.Stats().Malformed < before+6 {
		t.Fatalf("malformed %d -> %d", before, e.Stats().Malformed)
	}
	if e.Stats().Peers != 1 {
		t.Fatal("the peer was dropped")
	}
}

// MtuCheck is answered MtuOk; a malformed one is not.
func TestMtuCheckAnswered(t *testing.T) { bothVersions(t, mtuCheckAnswered) }

func mtuCheckAnswered(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	raw, _ := connectRaw(t, e, srv, 5)
	check := make([]byte, 1164)
	check[0] = byte(PropMtuCheck)
	binary.LittleEndian.PutUint32(check[1:], 1164)
	binary.LittleEndian.PutUint32(check[1160:], 1164)
	raw.send(check)
	var ok []byte
	for ok == nil {
		b := raw.mustRecv(wait)
		if Property(b[0]&0x1f) == PropMtuOk {
			ok = b
		}
	}
	want := append([]byte{byte(PropMtuOk)}, check[1:]...)
	if !bytes.Equal(ok, want) {
		t.Fatal("MtuOk differs from the check it answers")
	}
}
