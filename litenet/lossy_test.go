package litenet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// lossyProxy forwards datagrams between one client and a server on
// loopback, losing, duplicating and reordering them at the given rates
// (each a fraction, decided per datagram with a seeded generator).
type lossyProxy struct {
	front, back *net.UDPConn
	loss, dup   float64
	reorder     float64
	wg          sync.WaitGroup
	mu          sync.Mutex
	rng         *rand.Rand // guarded by mu
	client      netip.AddrPort
	gotClient   chan struct{}
}

func newLossyProxy(tb testing.TB, server netip.AddrPort, loss, dup, reorder float64) *lossyProxy {
	tb.Helper()
	front, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	back, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(server))
	if err != nil {
		tb.Fatal(err)
	}
	p := &lossyProxy{front: front, back: back, loss: loss, dup: dup, reorder: reorder,
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

func (p *lossyProxy) addr() netip.AddrPort { return p.front.LocalAddr().(*net.UDPAddr).AddrPort() }

// pump carries one direction until the sockets close.
func (p *lossyProxy) pump(toServer bool) {
	buf := make([]byte, 2048)
	var held []byte
	for {
		var n int
		var err error
		if toServer {
			var from netip.AddrPort
			n, from, err = p.front.ReadFromUDPAddrPort(buf)
			if err == nil && !p.client.IsValid() {
				p.client = from // written once, before gotClient is closed
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

// Under 10% loss, duplicates and reordering, ReliableOrdered stays in
// order and complete, ReliableUnordered delivers each message exactly
// once, both ways.
func TestReliableUnderLossDuplicationReorder(t *testing.T) {
	srv := newRecorder(true)
	e := listen(t, Config{Handler: srv})
	proxy := newLossyProxy(t, e.LocalAddr(), 0.10, 0.05, 0.10)
	cli := newRecorder(false)
	_, p := dial(t, proxy.addr(), Config{Handler: cli})

	const nRO, nRU = 600, 300
	for i := range nRO {
		size := 20
		if i%50 == 0 {
			size = 4000 // fragments too
		}
		msg := fmt.Appendf(nil, "ro%05d-", i)
		msg = append(msg, pattern(size)...)
		if err := p.Send(ReliableOrdered, msg); err != nil {
			t.Fatal(err)
		}
		if i < nRU {
			if err := p.Send(ReliableUnordered, fmt.Appendf(nil, "ru%05d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(who string, r *recorder) {
		t.Helper()
		nextRO := 0
		ru := map[string]int{}
		for nextRO < nRO || len(ru) < nRU {
			ev := r.waitKind(t, "recv", 20*time.Second)
			switch ev.m {
			case ReliableOrdered:
				if want := fmt.Sprintf("ro%05d-", nextRO); string(ev.data[:8]) != want {
					t.Fatalf("%s: ReliableOrdered message %q, want %s", who, ev.data[:8], want)
				}
				nextRO++
			case ReliableUnordered:
				ru[string(ev.data)]++
				if ru[string(ev.data)] > 1 {
					t.Fatalf("%s: %s delivered twice", who, ev.data)
				}
			}
		}
	}
	check("server", srv)
	check("client", cli) // the echoes
}
