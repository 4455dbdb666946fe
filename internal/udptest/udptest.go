// Package udptest has UDP helpers for tests: a lossy proxy that loses,
// duplicates and reorders datagrams between one client and a server on
// loopback.
package udptest

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// LossyProxy forwards datagrams between one client and a server on
// loopback, losing, duplicating and reordering them at the given rates
// (each a fraction, decided per datagram with a seeded generator, so a run
// is reproducible up to the scheduling of the two directions). It carries
// traffic until the test ends.
type LossyProxy struct {
	front, back *net.UDPConn
	loss, dup   float64
	reorder     float64
	wg          sync.WaitGroup
	mu          sync.Mutex
	rng         *rand.Rand     // guarded by mu
	client      netip.AddrPort // written once by the client-side pump before gotClient closes
	gotClient   chan struct{}
}

// NewLossyProxy starts a proxy in front of server; clients send to Addr.
func NewLossyProxy(tb testing.TB, server netip.AddrPort, loss, dup, reorder float64) *LossyProxy {
	tb.Helper()
	front, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	back, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(server))
	if err != nil {
		tb.Fatal(err)
	}
	p := &LossyProxy{front: front, back: back, loss: loss, dup: dup, reorder: reorder,
		rng: rand.New(rand.NewPCG(1, 2)), gotClient: make(chan struct{})}
	p.wg.Go(func() { p.pump(true) })
	p.wg.Go(func() { p.pump(false) })
	tb.Cleanup(func() {
		front.Close()
		back.Close()
		p.wg.Wait()
	})
	return p
}

// Addr is where the client sends.
func (p *LossyProxy) Addr() netip.AddrPort { return p.front.LocalAddr().(*net.UDPAddr).AddrPort() }

// pump carries one direction until the sockets close.
func (p *LossyProxy) pump(toServer bool) {
	buf := make([]byte, 65536)
	var held []byte
	for {
		var n int
		var err error
		if toServer {
			var from netip.AddrPort
			n, from, err = p.front.ReadFromUDPAddrPort(buf)
			if err == nil && !p.client.IsValid() {
				p.client = from
				close(p.gotClient)
			}
		} else {
			n, err = p.back.Read(buf)
		}
		if err != nil {
			return
		}
		send := func(b []byte) {
			if toServer {
				_, _ = p.back.Write(b)
			} else {
				<-p.gotClient
				_, _ = p.front.WriteToUDPAddrPort(b, p.client)
			}
		}
		p.mu.Lock()
		lose, dup, hold := p.rng.Float64() < p.loss, p.rng.Float64() < p.dup, p.rng.Float64() < p.reorder
		p.mu.Unlock()
		d := append([]byte(nil), buf[:n]...)
		switch {
		case lose:
		case hold && held == nil:
			held = d // goes out after the next one
			continue
		default:
			send(d)
			if dup {
				send(d)
			}
		}
		if held != nil {
			send(held)
			held = nil
		}
	}
}
