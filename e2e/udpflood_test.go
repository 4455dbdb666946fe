package e2e

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/litenet"
)

// TestUDPSmokeDuringForgedConnectFlood: ConnectRequests forged from the
// smoke's own address (127.0.0.1, from 64 ports: the pending table's
// share of one source), each followed by a forged packet so it looks like
// a client that went on, flood the relay while `purrctl smoke --transport
// udp` (and udp1) runs from that address; the smoke passes. The flood is
// bounded (40,000 datagrams at most, about 13,000 a second, under the
// relay's 20,000 answers a second).
func TestUDPSmokeDuringForgedConnectFlood(t *testing.T) {
	s := startDev(t, nil, "eu")
	r := s.relays[0]
	for _, c := range []struct {
		tr   client.Transport
		addr string
		v    litenet.Version
	}{
		{client.TransportUDP, r.UDPAddr(), litenet.V2},
		{client.TransportUDP1, r.UDP1Addr(), litenet.V1},
	} {
		t.Run(c.tr.String(), func(t *testing.T) {
			to := netip.MustParseAddrPort(c.addr)
			var socks []*net.UDPConn
			for range 64 {
				sc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sc.Close() })
				socks = append(socks, sc)
			}
			wireOf := func(b []byte) []byte { litenet.ToWire(c.v, b); return b }
			var sent atomic.Int64
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for round := int64(1); sent.Load() < 40000; round++ {
					select {
					case <-stop:
						return
					default:
					}
					for i, sc := range socks {
						ct := round<<20 | int64(i)
						_, _ = sc.WriteToUDPAddrPort(wireOf(litenet.AppendConnectRequest(nil, 0, ct, 0, to, "PurrNet")), to)
						_, _ = sc.WriteToUDPAddrPort(wireOf([]byte{byte(litenet.PropUnreliable), 0}), to)
						sent.Add(2)
					}
					time.Sleep(10 * time.Millisecond) // wall clock: paces the flood
				}
			}()
			for sent.Load() < 10000 { // a second of flood before the smoke starts
				time.Sleep(time.Millisecond) // wall clock: waits for the flood to start
			}
			_, err := client.Smoke(tctx(t), client.SmokeOptions{Balancer: s.bal.URL(), Region: "eu", StrictRegion: true,
				Transport: c.tr, Timeout: 10 * time.Second})
			during := sent.Load()
			close(stop)
			<-done
			if err != nil {
				t.Fatalf("smoke over %v during the flood (%d forged datagrams): %v", c.tr, during, err)
			}
			t.Logf("smoke over %v passed during %d forged datagrams", c.tr, during)
		})
	}
}
