package udptransport

import (
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/litenet"
)

// natNopHandler is the Handler of the endpoint natTable.request sends
// from; nothing connects to it.
type natNopHandler struct{}

func (natNopHandler) Connected(*litenet.Peer) bool                  { return false }
func (natNopHandler) Receive(*litenet.Peer, litenet.Method, []byte) {}
func (natNopHandler) Flush(*litenet.Peer) bool                      { return false }
func (natNopHandler) Disconnected(*litenet.Peer, litenet.Reason)    {}
func (natNopHandler) Nat(netip.AddrPort, litenet.NatPacket)         {}

// natRig is a natTable on a fake clock, the loopback endpoint it answers
// from, and the host's and the client's sockets the answers go to.
type natRig struct {
	clk          *clock.Fake
	nat          natTable
	ep           *litenet.Endpoint
	host, client *net.UDPConn
	hostA, cliA  netip.AddrPort // their addresses (the token's)
	stranger     netip.AddrPort // an address the token was not issued to
}

// The internal addresses the sides claim in their requests.
var (
	natHostIn     = netip.MustParseAddrPort("10.0.0.1:1001")
	natClientIn   = netip.MustParseAddrPort("10.0.0.2:1002")
	natStrangerIn = netip.MustParseAddrPort("10.0.0.3:1003")
)

const natTestToken = "tok_1"

func newNatRig(t *testing.T) *natRig {
	t.Helper()
	r := &natRig{clk: clock.NewFake(time.Unix(1_800_000_000, 0))}
	r.nat.init(r.clk)
	ep, err := litenet.Listen("udp4", "127.0.0.1:0", litenet.Config{Key: "PurrNet", Handler: natNopHandler{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	r.ep = ep
	for _, c := range []**net.UDPConn{&r.host, &r.client} {
		u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = u.Close() })
		*c = u
	}
	r.hostA = r.host.LocalAddr().(*net.UDPAddr).AddrPort()
	r.cliA = r.client.LocalAddr().(*net.UDPAddr).AddrPort()
	r.stranger = netip.AddrPortFrom(r.hostA.Addr(), 1) // nothing reads it: request never sends to a sender
	r.nat.expect(natTestToken, r.hostA, r.cliA)
	return r
}

func (r *natRig) ask(from, internal netip.AddrPort) {
	r.nat.request(r.ep, from, internal, []byte(natTestToken))
}

// next is the first introduction c receives (bounded wall-clock wait on a
// real socket).
func (r *natRig) next(t *testing.T, c *net.UDPConn, who string) litenet.NatPacket {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second)) // wall clock: a real socket's deadline
	b := make([]byte, 2048)
	n, src, err := c.ReadFromUDPAddrPort(b)
	if err != nil {
		t.Fatalf("%s got no introduction: %v", who, err)
	}
	if src != r.ep.LocalAddr() {
		t.Fatalf("%s got a datagram from %v, want the relay %v", who, src, r.ep.LocalAddr())
	}
	var got []litenet.NatPacket
	if err := litenet.ParseNat(b[:n], func(p litenet.NatPacket) {
		p.Token = append([]byte(nil), p.Token...)
		got = append(got, p)
	}); err != nil || len(got) != 1 || got[0].Kind != litenet.NatResponse || string(got[0].Token) != natTestToken {
		t.Fatalf("%s got %+v (%v), want one introduce response for %q", who, got, err, natTestToken)
	}
	return got[0]
}

// expectIntroduced checks the first datagram of each side: the host gets
// the client's internal address (and the client's socket as external),
// the client the host's.
func (r *natRig) expectIntroduced(t *testing.T, hostSees, clientSees netip.AddrPort) {
	t.Helper()
	if h := r.next(t, r.host, "host"); h.Internal != hostSees || h.External != r.cliA {
		t.Fatalf("host was introduced to internal %v external %v, want %v and %v", h.Internal, h.External, hostSees, r.cliA)
	}
	if c := r.next(t, r.client, "client"); c.Internal != clientSees || c.External != r.hostA {
		t.Fatalf("client was introduced to internal %v external %v, want %v and %v", c.Internal, c.External, clientSees, r.hostA)
	}
}

// Rule: only the host or the client of a token may ask; a stranger's
// request neither completes nor starts a pair. (A stranger asks first: were
// it taken as a half, the side that follows would be paired with it and
// introduced to the stranger's internal address.)
func TestNATOnlyHostOrClientMayAsk(t *testing.T) {
	t.Run("host then client", func(t *testing.T) {
		r := newNatRig(t)
		r.ask(r.stranger, natStrangerIn)
		r.ask(r.hostA, natHostIn)
		r.ask(r.stranger, natStrangerIn)
		r.ask(r.cliA, natClientIn)
		r.expectIntroduced(t, natClientIn, natHostIn)
	})
	t.Run("client then host", func(t *testing.T) {
		r := newNatRig(t)
		r.ask(r.stranger, natStrangerIn)
		r.ask(r.cliA, natClientIn)
		r.ask(r.stranger, natStrangerIn)
		r.ask(r.hostA, natHostIn)
		r.expectIntroduced(t, natClientIn, natHostIn)
	})
}

// Rule: the pair is introduced once both sides asked; a repeat from the
// same side (PurrNet asks every 0.5 s) only refreshes its half, with its
// latest internal address, and introduces nobody.
func TestNATRepeatDoesNotPair(t *testing.T) {
	for _, hostFirst := range []bool{true, false} {
		r := newNatRig(t)
		first, firstIn, second, secondIn := r.hostA, natHostIn, r.cliA, natClientIn
		if !hostFirst {
			first, firstIn, second, secondIn = r.cliA, natClientIn, r.hostA, natHostIn
		}
		stale := netip.MustParseAddrPort("10.9.9.9:9")
		r.ask(first, stale)
		r.clk.Advance(500 * time.Millisecond)
		r.ask(first, firstIn) // the repeat
		r.clk.Advance(500 * time.Millisecond)
		r.ask(second, secondIn)
		r.expectIntroduced(t, natClientIn, natHostIn)
	}
}

// Rule: each side gets the other's internal address, whichever asked
// first.
func TestNATEachSideGetsTheOthersInternal(t *testing.T) {
	t.Run("host first", func(t *testing.T) {
		r := newNatRig(t)
		r.ask(r.hostA, natHostIn)
		r.ask(r.cliA, natClientIn)
		r.expectIntroduced(t, natClientIn, natHostIn)
	})
	t.Run("client first", func(t *testing.T) {
		r := newNatRig(t)
		r.ask(r.cliA, natClientIn)
		r.ask(r.hostA, natHostIn)
		r.expectIntroduced(t, natClientIn, natHostIn)
	})
}

// Rule: a half lives as long as its token: one exactly natTokenTTL old,
// at the token's last instant, still pairs (only one older than
// natTokenTTL is forgotten).
func TestNATHalfAtTTLStillPairs(t *testing.T) {
	r := newNatRig(t)
	r.ask(r.hostA, natHostIn)
	r.clk.Advance(natTokenTTL)
	r.ask(r.cliA, natClientIn)
	r.expectIntroduced(t, natClientIn, natHostIn)
}

// TestNATTokensAreBounded: the table of NAT introduction tokens holds up
// to natMaxTokens live ones; past that, expired ones make room and, when
// none has expired, a new pair is simply not introduced (it stays relayed).
func TestNATTokensAreBounded(t *testing.T) {
	var nt natTable
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	nt.init(clk)
	h, c := netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")
	for i := range natMaxTokens {
		nt.expect(strconv.Itoa(i), h, c)
	}
	nt.expect("one-more", h, c)
	if _, ok := nt.tokens["one-more"]; ok || len(nt.tokens) != natMaxTokens {
		t.Fatalf("%d tokens (the extra one kept: %v), want the bound of %d live ones", len(nt.tokens), ok, natMaxTokens)
	}
	clk.Advance(natTokenTTL + time.Second)
	nt.expect("after-expiry", h, c)
	if _, ok := nt.tokens["after-expiry"]; !ok || len(nt.tokens) != 1 {
		t.Fatalf("after every token expired: %d tokens, new one kept %v", len(nt.tokens), ok)
	}
}
