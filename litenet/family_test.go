package litenet

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// A socket writes to the address family it is: an IPv4 one to sockaddr_in,
// an IPv6 one (dual-stack here) to sockaddr_in6, v4-mapped for an IPv4
// peer. Each client's messages come back echoed, so both directions of
// both families are checked.
func TestWriterAddressFamilies(t *testing.T) {
	if c, err := net.ListenPacket("udp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		c.Close()
	}
	for _, tc := range []struct {
		name, network, listen, client string
	}{
		{"ipv4 socket", "udp4", "127.0.0.1:0", "127.0.0.1"},
		{"ipv6 socket", "udp6", "[::1]:0", "::1"},
		{"dual-stack socket, ipv4 client", "udp", "[::]:0", "127.0.0.1"},
		{"dual-stack socket, ipv6 client", "udp", "[::]:0", "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRecorder(true)
			e, err := Listen(tc.network, tc.listen, Config{Key: "PurrNet", Handler: srv, Version: testVersion})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			to := netip.AddrPortFrom(netip.MustParseAddr(tc.client), e.LocalAddr().Port())
			cli := newRecorder(false)
			_, p := dial(t, to, Config{Handler: cli})
			want := map[Method]string{Unreliable: "unrel " + tc.name, ReliableOrdered: "ro " + tc.name}
			for m, s := range want {
				if err := p.Send(m, []byte(s)); err != nil {
					t.Fatal(err)
				}
			}
			for _, ev := range cli.collect(t, len(want), 5*time.Second) {
				if string(ev.data) != want[ev.m] {
					t.Errorf("echo %v: %q, want %q", ev.m, ev.data, want[ev.m])
				}
				delete(want, ev.m)
			}
			if len(want) != 0 {
				t.Errorf("no echo of %v", want)
			}
		})
	}
}

// An IPv6 address in an IPv4 socket's batch is refused by the kernel, not
// a panic: the datagram before it is written, it is counted lost.
func TestWriterRefusesForeignFamily(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := newWriter(c)
	if err != nil {
		t.Fatal(err)
	}
	o := newOutBatch(w)
	o.commit(append(o.slot(), 'a'), c.LocalAddr().(*net.UDPAddr).AddrPort())
	o.commit(append(o.slot(), 'b'), netip.MustParseAddrPort("[2001:db8::1]:9"))
	o.write()
	if o.sent != 1 || o.errs != 1 {
		t.Fatalf("sent %d, lost %d; want 1 and 1", o.sent, o.errs)
	}
	buf := make([]byte, 8)
	if n, _, err := c.ReadFromUDPAddrPort(buf); err != nil || string(buf[:n]) != "a" {
		t.Fatalf("read %q (%v), want a", buf[:n], err)
	}
}
