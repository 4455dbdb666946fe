package litenet

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"
)

// spoofers opens n sockets on distinct loopback addresses (127.0.<net>.1..n),
// each standing for one forged source.
func spoofers(tb testing.TB, net3 byte, n int, to netip.AddrPort) []*rawConn {
	tb.Helper()
	var out []*rawConn
	for i := range n {
		ip := net.IPv4(127, 0, net3, byte(1+i%250))
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: ip})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		out = append(out, &rawConn{tb: tb, c: c, to: to, v: testVersion})
	}
	return out
}

// A flood of connect requests from forged sources fills only the bounded
// pending table, each new one evicting the oldest that never answered its
// accept; a real client connecting meanwhile gets in and plays.
func TestConnectFloodCannotStarveRealPeers(t *testing.T) {
	bothVersions(t, connectFloodCannotStarveRealPeers)
}

func connectFloodCannotStarveRealPeers(t *testing.T) {
	srv := newRecorder(false)
	const maxPending = 32
	e := listen(t, Config{Handler: srv, MaxPending: maxPending, MaxPendingPerIP: 4})
	flood := spoofers(t, 1, 200, e.LocalAddr())
	for i, s := range flood {
		s.send(connectRequest(0, int64(i+1), "PurrNet"))
	}
	// The flood goes on while a real client connects and, as PurrNet's
	// does, sends its first message the moment it is accepted.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for round := range 20 {
			for i, s := range flood {
				_, _ = s.c.WriteToUDPAddrPort(connectRequest(0, int64((round+1)*1000+i+1), "PurrNet"), s.to)
			}
		}
	}()
	for i := range 3 {
		_, p := dial(t, e.LocalAddr(), Config{Handler: newRecorder(false)})
		msg := fmt.Sprintf("player %d", i)
		if err := p.Send(ReliableOrdered, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if ev := srv.waitKind(t, "recv", wait); string(ev.data) != msg {
			t.Fatalf("got %q", ev.data)
		}
	}
	<-done
	st := e.Stats()
	if st.Pending > maxPending || st.Peers > maxPending+3 {
		t.Fatalf("pending %d, peers %d: the bound is %d pending and 3 players", st.Pending, st.Peers, maxPending)
	}
	if st.Evicted == 0 {
		t.Fatalf("nothing was evicted: %+v", st)
	}
}

// One source address holds at most MaxPendingPerIP pending connections.
func TestPendingPerSourceBound(t *testing.T) { bothVersions(t, pendingPerSourceBound) }

func pendingPerSourceBound(t *testing.T) {
	e := listen(t, Config{Handler: newRecorder(false), MaxPendingPerIP: 3})
	var socks []*rawConn
	for range 6 {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 2, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		socks = append(socks, &rawConn{tb: t, c: c, to: e.LocalAddr(), v: testVersion})
	}
	for i, s := range socks {
		s.send(connectRequest(0, int64(i+1), "PurrNet"))
		// Every request is answered (past the bound without state: a real
		// client then proves itself with the accept's cookie).
		if b := s.recv(wait); b == nil || Property(b[0]) != PropConnectAccept {
			t.Fatalf("request %d answered %x", i, b)
		}
	}
	// Each past the bound pushed out the source's oldest unproven entry.
	if st := e.Stats(); st.Pending != 3 || st.Peers != 3 || st.Evicted != 3 || st.Refused != 0 {
		t.Fatalf("pending %d, peers %d, evicted %d, refused %d; want 3, 3, 3, 0", st.Pending, st.Peers, st.Evicted, st.Refused)
	}
	for _, s := range socks[:3] {
		if e.peers.get(s.addr()) != nil {
			t.Fatalf("%v, among the oldest, was kept", s.addr())
		}
	}
}

// Answers to strangers are rate-limited: a burst past ReplyRate's bucket
// goes unanswered and is counted.
func TestRepliesToStrangersRateLimited(t *testing.T) { bothVersions(t, repliesToStrangersRateLimited) }

func repliesToStrangersRateLimited(t *testing.T) {
	clk := fakeClock() // no refill: only the initial burst is answered
	e := listen(t, Config{Handler: newRecorder(false), Clock: clk, ReplyRate: 100})
	raw := newRaw(t, e.LocalAddr())
	for range 50 {
		raw.send([]byte{byte(PropPing), 1, 0})
	}
	answers := 0
	for raw.recv(200*time.Millisecond) != nil {
		answers++
	}
	if answers != 10 { // burst = ReplyRate/10
		t.Fatalf("%d answers, want the burst of 10", answers)
	}
	if got := e.Stats().RateLimited; got != 40 {
		t.Fatalf("rate limited %d, want 40", got)
	}
}

// A client accepted without state (the pending table was full of
// unanswered requests) proves itself: its first packet gets PeerNotFound,
// it answers "network changed" echoing the accept's peer id (the cookie),
// and it is a connection at once. A forged one gets PeerNotFound 1.
func TestAcceptCookieRecovers(t *testing.T) { bothVersions(t, acceptCookieRecovers) }

func acceptCookieRecovers(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv, MaxPending: 1})
	filler := newRaw(t, e.LocalAddr())
	filler.send(connectRequest(0, 1, "PurrNet"))
	filler.mustRecv(wait)
	// An unproven filler would be evicted by the next request; a proven
	// one that is never confirmed stays.
	srv.noConfirm.Store(true)
	filler.send([]byte{byte(PropUnreliable), 0})
	srv.waitKind(t, "connected", wait)
	filler.prove()
	waitProven(t, e, filler.addr())

	raw := newRaw(t, e.LocalAddr())
	raw.send(connectRequest(0, 42, "PurrNet"))
	accept, err := ParseConnectAccept(raw.mustRecv(wait))
	if err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Peers != 1 {
		t.Fatalf("peers %d: the accept should have been stateless", st.Peers)
	}
	raw.send([]byte{byte(PropUnreliable), 'x'})
	if b := raw.mustRecv(wait); !bytes.Equal(b, peerNotFound) {
		t.Fatalf("got %x, want PeerNotFound", b)
	}
	changed := func(id int32) []byte {
		b := make([]byte, 15)
		b[0] = byte(PropPeerNotFound)
		binary.LittleEndian.PutUint64(b[1:], 42)
		b[9], b[10] = 0, 1
		binary.LittleEndian.PutUint32(b[11:], uint32(id))
		return b
	}
	raw.send(changed(accept.PeerID ^ 1))
	if b := raw.mustRecv(wait); !bytes.Equal(b, peerNotFoundHard) {
		t.Fatalf("a wrong cookie got %x, want PeerNotFound 1", b)
	}
	// The pending table is full of a proven entry: a right cookie is
	// refused too until there is room.
	if got := e.Stats().Peers; got != 1 {
		t.Fatalf("peers %d", got)
	}
	srv.noConfirm.Store(false)
	e2 := listen(t, Config{Handler: srv})
	raw2 := newRaw(t, e2.LocalAddr())
	raw2.send(connectRequest(0, 42, "PurrNet"))
	acc2, _ := ParseConnectAccept(raw2.mustRecv(wait))
	// Forget the state the accept made, as an eviction would.
	for _, p := range e2.peers.all() {
		e2.forget(p)
	}
	raw2.send(changed(acc2.PeerID))
	if ev := srv.waitKind(t, "connected", wait); ev.p.Addr() != raw2.addr() {
		t.Fatalf("connected %v", ev.p.Addr())
	}
	raw2.send([]byte{byte(PropUnreliable), 'y'})
	if ev := srv.waitKind(t, "recv", wait); string(ev.data) != "y" {
		t.Fatalf("got %q", ev.data)
	}
}
