package litenet

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// Requests forged from the victim's own address (other ports of it, as
// the players behind one carrier-grade NAT share it), each followed by a
// forged packet so that it looks like a client that went on, fill that
// source's share of the pending table over and over; the victim's real
// clients still get in and play, each pushing out the oldest unproven
// entry of its source or, pushed out itself, coming back with the
// accept's cookie.
func TestForgedRequestsCannotLockOutTheirSource(t *testing.T) {
	bothVersions(t, forgedRequestsCannotLockOutTheirSource)
}

func forgedRequestsCannotLockOutTheirSource(t *testing.T) {
	srv := &players{got: make(chan string, 16)} // none authenticates: all stay pending
	const perIP = 8
	e := listen(t, Config{Handler: srv, MaxPendingPerIP: perIP})
	var flood []*rawConn
	for range 4 * perIP {
		flood = append(flood, newRaw(t, e.LocalAddr())) // 127.0.0.1, the clients' address
	}
	forge := func(round int) {
		for i, s := range flood {
			_, _ = s.c.WriteToUDPAddrPort(wireOf(connectRequest(0, int64(round*1000+i+1), "PurrNet")), s.to)
			_, _ = s.c.WriteToUDPAddrPort(wireOf([]byte{byte(PropUnreliable), 'f'}), s.to)
		}
	}
	forge(0)
	waitDatagramsIn(t, e, uint64(2*len(flood)))
	if st := e.Stats(); st.Pending != perIP {
		t.Fatalf("pending %d: the forged requests should fill the source's %d", st.Pending, perIP)
	}
	done := make(chan struct{})
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); <-done }
	defer halt() // a failing check returns before the flood's end: it must not outlive the test
	go func() {
		defer close(done)
		for round := 1; round <= 200; round++ { // bounded: 12,800 datagrams
			select {
			case <-stop:
				return
			default:
			}
			forge(round)
			time.Sleep(time.Millisecond) // wall clock: paces the flood over the clients' connects
		}
	}()
	for i := range 3 {
		_, p := dial(t, e.LocalAddr(), Config{Handler: newRecorder(false)})
		msg := fmt.Sprintf("player %d", i)
		if err := p.Send(ReliableOrdered, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		// An earlier player pushed out of the pending table comes back with
		// the accept's cookie as a new connection and sends its message
		// again, unacknowledged: that repeat may come first.
		timeout := time.After(5 * time.Second) // wall clock: bounds the wait on real sockets
	wait:
		for {
			select {
			case got := <-srv.got:
				if got == msg {
					break wait
				}
				if !earlierPlayer(got, i) {
					t.Fatalf("got %q, want %q", got, msg)
				}
			case <-timeout:
				t.Fatalf("%q never arrived", msg)
			}
		}
	}
	halt()
	if st := e.Stats(); st.Pending > perIP {
		t.Fatalf("pending %d past the source's bound %d", st.Pending, perIP)
	}
}

// earlierPlayer reports whether got is the message of a player before i.
func earlierPlayer(got string, i int) bool {
	for j := range i {
		if got == fmt.Sprintf("player %d", j) {
			return true
		}
	}
	return false
}

// players is a Handler that passes on the players' messages and drops
// the rest; it confirms nobody.
type players struct{ got chan string }

func (h *players) Connected(*Peer) bool { return true }
func (h *players) Receive(_ *Peer, _ Method, d []byte) {
	if strings.HasPrefix(string(d), "player") {
		h.got <- string(d)
	}
}
func (h *players) Flush(*Peer) bool              { return false }
func (h *players) Disconnected(*Peer, Reason)    {}
func (h *players) Nat(netip.AddrPort, NatPacket) {}

// wireOf renumbers a packet written in the engine's numbering for the
// wire of the version under test.
func wireOf(b []byte) []byte {
	b = append([]byte(nil), b...)
	ToWire(testVersion, b)
	return b
}

// To an address that never proves it receives, the server sends, over the
// peer's whole life (accept, repeated accepts, acks, pings, pongs, echoes,
// resends, the Disconnects at its timeout), no more datagrams and no more
// bytes than came from it; and every datagram it sends is counted in
// Stats.Sent.
func TestNoReflectionToUnprovenAddresses(t *testing.T) {
	bothVersions(t, noReflectionToUnprovenAddresses)
}

func noReflectionToUnprovenAddresses(t *testing.T) {
	forged := map[string][][]byte{
		"requests only": {connectRequest(0, 10, "PurrNet"), connectRequest(0, 10, "PurrNet"), connectRequest(0, 10, "PurrNet")},
		"a client that goes on": {
			connectRequest(0, 10, "PurrNet"),
			{byte(PropUnreliable), 'u'},
			{byte(PropChanneled), 0, 0, byte(ReliableOrdered), 'a', 'u', 't', 'h'},
			{byte(PropPing), 5, 0},
			{byte(PropChanneled), 1, 0, byte(ReliableOrdered), 'm', 'o', 'r', 'e'},
		},
	}
	for name, datagrams := range forged {
		t.Run(name, func(t *testing.T) {
			clk := fakeClock()
			srv := newRecorder(true) // echoes: data is owed to the address
			srv.noConfirm.Store(true)
			e := listen(t, Config{Handler: srv, Clock: clk, PingInterval: 900 * time.Millisecond})
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 3, 1)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			raw := &rawConn{tb: t, c: c, to: e.LocalAddr(), v: testVersion}
			var in, inBytes, out, outBytes int
			drain := func() {
				for b := raw.recv(20 * time.Millisecond); b != nil; b = raw.recv(20 * time.Millisecond) {
					out++
					outBytes += len(b)
				}
			}
			for _, d := range datagrams {
				raw.send(d)
				in++
				inBytes += len(d)
				waitDatagramsIn(t, e, uint64(in))
				advance(t, clk, 50*time.Millisecond, e)
				drain()
			}
			for range 150 { // 15 s: past every timeout and the Disconnect repeats
				advance(t, clk, 100*time.Millisecond, e)
				drain()
			}
			settle(t, e)
			drain()
			st := e.Stats()
			if st.Peers != 0 {
				t.Fatalf("%d peers left after the whole life", st.Peers)
			}
			t.Logf("in %d datagrams, %d bytes; out %d datagrams, %d bytes", in, inBytes, out, outBytes)
			if out > in || outBytes > inBytes {
				t.Fatalf("sent %d datagrams of %d bytes to an unproven address that sent %d of %d", out, outBytes, in, inBytes)
			}
			if st.Sent != uint64(out) {
				t.Fatalf("Stats.Sent %d, but %d datagrams arrived", st.Sent, out)
			}
		})
	}
}
