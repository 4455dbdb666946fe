package litenet

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"
)

// The socket's reader sets its message headers up once and reuses them
// from read to read: on a dual-stack socket IPv4 and IPv6 senders come in
// turn through the same header with their own addresses; a datagram too
// long for the buffer is reported truncated without marking the next one
// read into the same header; a read of several after reads of one
// reports each of them. With arrival stamps each datagram read has its
// own, taken between its write and the read. After each read the test
// shortens the name and control lengths of the headers it filled, as a
// kernel writing back a shorter address or no stamp would: the next read
// must give them their room back.
func TestReaderReusesItsHeaders(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testReaderReusesItsHeaders(t, false) })
	t.Run("arrival stamps", func(t *testing.T) { testReaderReusesItsHeaders(t, true) })
}

func testReaderReusesItsHeaders(t *testing.T, arrivals bool) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv6unspecified})
	if err != nil {
		t.Skipf("no dual-stack socket: %v", err)
	}
	defer srv.Close()
	port := srv.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	v4, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)))
	if err != nil {
		t.Fatal(err)
	}
	defer v4.Close()
	v6, err := net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.IPv6Loopback(), port)))
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer v6.Close()
	rd, err := newReader(srv, arrivals, readBatch)
	if err != nil {
		t.Fatal(err)
	}
	type dgram struct {
		from *net.UDPConn
		b    []byte
	}
	// Loopback queues each datagram on the receiving socket before Write
	// returns, so a read after the writes finds all of them.
	read := func(want ...dgram) {
		t.Helper()
		before := time.Now().UnixNano()
		for _, w := range want {
			if _, err := w.from.Write(w.b); err != nil {
				t.Fatal(err)
			}
		}
		n, err := rd.read()
		after := time.Now().UnixNano()
		if err != nil || n != len(want) {
			t.Fatalf("read %d datagrams (%v), want %d", n, err, len(want))
		}
		for i := range n {
			at := rd.arrival(i)
			if arrivals && (at < before || at > after) || !arrivals && at != 0 {
				t.Fatalf("datagram %d stamped %d, want between %d and %d (stamps %v)", i, at, before, after, arrivals)
			}
		}
		defer func() {
			for i := range n {
				h := &rd.(*mmsgReader).hdrs[i].Hdr
				h.Namelen = 0
				h.SetControllen(0)
			}
		}()
		for i, w := range want {
			addr, b, ok := rd.datagram(i)
			from := w.from.LocalAddr().(*net.UDPAddr).AddrPort()
			from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
			switch {
			case len(w.b) > readBufSize && ok:
				t.Fatalf("datagram %d of %d bytes was not reported truncated", i, len(w.b))
			case len(w.b) <= readBufSize && (!ok || addr != from || !bytes.Equal(b, w.b)):
				t.Fatalf("datagram %d: from %v %q (ok %v), want from %v %q", i, addr, b, ok, from, w.b)
			}
		}
	}
	read(dgram{v4, []byte("ipv4 first")})
	read(dgram{v6, []byte("then ipv6 in the same header")})
	read(dgram{v4, make([]byte, readBufSize+1)})
	read(dgram{v4, []byte("after a truncated one")})
	read(dgram{v4, []byte("a")}, dgram{v4, make([]byte, readBufSize+100)}, dgram{v4, []byte("c")})
	read(dgram{v6, []byte("one")}, dgram{v6, []byte("two")}, dgram{v6, []byte("three")})
	read(dgram{v4, []byte("alone")})
	read(dgram{v4, []byte("x")}, dgram{v6, []byte("y")}, dgram{v6, []byte("z")})
}

// A reader takes at most its batch a call (a client endpoint's is
// clientReadBatch): what is left waits for the next call, in order.
func TestReaderBatchBound(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	rd, err := newReader(srv, false, clientReadBatch)
	if err != nil {
		t.Fatal(err)
	}
	const total = clientReadBatch + 3
	for i := range total {
		if _, err := cli.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	next := 0
	for _, want := range []int{clientReadBatch, 3} {
		n, err := rd.read()
		if err != nil || n != want {
			t.Fatalf("read %d (%v), want %d", n, err, want)
		}
		for i := range n {
			if _, b, ok := rd.datagram(i); !ok || len(b) != 1 || int(b[0]) != next {
				t.Fatalf("datagram %d: %v (ok %v), want [%d]", i, b, ok, next)
			}
			next++
		}
	}
}
