package litenet

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// FuzzServerStranger feeds arbitrary datagrams to a server from addresses
// it has no connection with (the datagrams every scanner and spoofer can
// send): nothing panics, only a ConnectRequest (or a "network changed"
// packet with the server's own cookie) makes a connection, and every
// answer to a stranger is no longer than the datagram it answers (the
// server is no amplifier). Connect requests come from an address of their
// own, whose connection is dropped after each input.
func FuzzServerStranger(f *testing.F) {
	captureSeeds(f, true)
	captureSeeds(f, false)
	fuzzStranger(f, V2)
}

// FuzzServerStranger1 is FuzzServerStranger for a 1.x server, seeded with
// the 1.3.1 session and 2.x datagrams (a 2.x client at the 1.x port).
func FuzzServerStranger1(f *testing.F) {
	captureSeedsV(f, V1, true)
	captureSeedsV(f, V1, false)
	captureSeeds(f, true)
	fuzzStranger(f, V1)
}

func fuzzStranger(f *testing.F, v Version) {
	seed := func(b []byte) { ToWire(v, b); f.Add(b) }
	seed(connectRequest(0, 1, "PurrNet"))
	seed(connectRequest(1, 2, "wrong key"))
	seed(AppendDisconnect(nil, 0, 1))
	seed([]byte{byte(PropPing), 1, 0})
	seed([]byte{byte(PropUnreliable), 'x'})
	seed([]byte{byte(PropMerged), 2, 0, byte(PropPing), 0})
	nc := AppendConnectAccept(nil, 99, 0, 12345)
	nc[0], nc[10] = byte(PropPeerNotFound), 1
	seed(nc)
	bad := connectRequest(0, 3, "PurrNet")
	binary.LittleEndian.PutUint32(bad[1:], ProtocolID+1)
	seed(bad)

	e := listen(f, Config{Handler: echoHandler{}, Version: v})
	s := e.socks[0]
	connector := newRaw(f, e.LocalAddr())
	strangers := []*rawConn{newRaw(f, e.LocalAddr()), newRaw(f, e.LocalAddr())}
	buf := make([]byte, 2048)
	f.Fuzz(func(t *testing.T, wire []byte) {
		b := append([]byte(nil), wire...) // what the engine reads, renumbered
		FromWire(v, b)
		from := strangers[len(b)%2]
		if len(b) > 0 && Property(b[0]&0x1f) == PropConnectRequest {
			from = connector
		}
		addr := from.addr()
		s.flushMu.Lock()
		s.handle(addr, append([]byte(nil), wire...), e.now())
		s.flushMu.Unlock()
		if p := e.peers.get(addr); p != nil {
			if from != connector {
				nc := len(b) == headerSizes[PropConnectAccept] && Property(b[0]&0x1f) == PropPeerNotFound &&
					int32(binary.LittleEndian.Uint32(b[11:])) == e.cookie(addr, int64(binary.LittleEndian.Uint64(b[1:])))
				if !nc {
					t.Fatalf("%x from a stranger made a connection", b)
				}
			}
			p.mu.Lock()
			p.state, p.reason = stateGone, ReasonReconnect
			p.mu.Unlock()
			e.forget(p)
		}
		if from == connector {
			return // its accept and what follows come from the flusher, later
		}
		// Loopback delivers within the send: what the server answered is
		// queued at the stranger already.
		for {
			_ = from.c.SetReadDeadline(time.Now())
			n, _, err := from.c.ReadFromUDPAddrPort(buf)
			if err != nil {
				break
			}
			if n > len(b) {
				t.Fatalf("%d-byte answer %x to the %d-byte %x", n, buf[:n], len(b), b)
			}
		}
	})
}

// FuzzPackets: Packets splits a datagram into its packets (a Merged one
// into the packets it carries). The packets are non-empty slices of the
// datagram, in order, and re-merging them gives back a prefix of it.
func FuzzPackets(f *testing.F) {
	captureSeeds(f, true)
	captureSeeds(f, false)
	f.Add([]byte{byte(PropMerged), 2, 0, byte(PropPing), 0, 1, 0, byte(PropMtuOk)})
	f.Add([]byte{byte(PropMerged), 9, 0, 1})
	f.Add([]byte{byte(PropMerged), 0, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ps := Packets(b)
		if len(b) == 0 || Property(b[0]&0x1f) != PropMerged {
			if len(ps) != 1 || !bytes.Equal(ps[0], b) {
				t.Fatalf("%x split into %x", b, ps)
			}
			return
		}
		again := []byte{b[0]}
		for _, p := range ps {
			if len(p) == 0 {
				t.Fatalf("%x: an empty packet", b)
			}
			again = binary.LittleEndian.AppendUint16(again, uint16(len(p)))
			again = append(again, p...)
		}
		if !bytes.HasPrefix(b, again) {
			t.Fatalf("%x split into %x, re-merged %x", b, ps, again)
		}
	})
}
