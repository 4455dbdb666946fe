package litenet

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counter counts received messages and echoes them (server side).
type counter struct {
	echo bool
	n    atomic.Int64
}

func (c *counter) Connected(p *Peer) bool { p.Confirm(); return true }
func (c *counter) Receive(p *Peer, m Method, d []byte) {
	if c.echo {
		_ = p.Send(m, d)
	}
	c.n.Add(1)
}
func (c *counter) Flush(*Peer) bool              { return false }
func (c *counter) Disconnected(*Peer, Reason)    {}
func (c *counter) Nat(netip.AddrPort, NatPacket) {}

// Stress of the FlushDelay hand-off: many goroutines send to many peers on
// both sides with a delay set; every echo comes back (no woken peer is
// left unflushed). Real clock; the deadline only bounds a stall.
func TestFlushDelayStress(t *testing.T) {
	srv := &counter{echo: true}
	e := listen(t, Config{Handler: srv, FlushDelay: 3 * time.Millisecond})
	const clients, senders, per = 6, 3, 300
	var wg sync.WaitGroup
	cs := make([]*counter, clients)
	for i := range clients {
		cs[i] = &counter{}
		_, p := dial(t, e.LocalAddr(), Config{Handler: cs[i], FlushDelay: 2 * time.Millisecond})
		for range senders {
			wg.Go(func() {
				for j := range per {
					_ = p.Send(ReliableOrdered, []byte{byte(j), byte(j >> 8)})
					if j%50 == 0 {
						time.Sleep(time.Millisecond) // vary the phase against the delay
					}
				}
			})
		}
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second) // wall clock: bounds a stall
	for {
		done := true
		for _, c := range cs {
			done = done && c.n.Load() == senders*per
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			for i, c := range cs {
				t.Logf("client %d got %d of %d", i, c.n.Load(), senders*per)
			}
			t.Fatal("echoes stalled")
		}
		time.Sleep(time.Millisecond)
	}
}
