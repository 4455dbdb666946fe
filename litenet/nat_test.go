package litenet

import (
	"net/netip"
	"testing"
)

// The type hashes are LiteNetLib's (docs/UDP.md, NAT messages).
func TestNatTypeHashes(t *testing.T) {
	for _, c := range []struct {
		got, want uint64
	}{{hashRequest, 0x9c66b1bf2610be88}, {hashResponse, 0x619122c9fbcbdb44}, {hashPunch, 0xd2f884792e5c4f4a}} {
		if c.got != c.want {
			t.Errorf("hash %#x, want %#x", c.got, c.want)
		}
	}
}

// A server hands NAT introduce requests to its Handler, with the sender's
// external address; NatIntroduce tells each side the other's addresses.
func TestNatIntroduce(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	host, client := newRaw(t, e.LocalAddr()), newRaw(t, e.LocalAddr())
	hostIn := netip.MustParseAddrPort("10.0.0.5:5000")
	clientIn := netip.MustParseAddrPort("192.168.1.9:6000")
	host.send(AppendNatRequest(nil, hostIn, "r1_00ff_7"))
	client.send(AppendNatRequest(nil, clientIn, "r1_00ff_7"))
	var reqs []event
	for len(reqs) < 2 {
		reqs = append(reqs, srv.waitKind(t, "nat", wait))
	}
	for _, r := range reqs {
		if r.nat.Kind != NatRequest || string(r.nat.Token) != "r1_00ff_7" {
			t.Fatalf("request %+v", r.nat)
		}
		if r.from == host.addr() && r.nat.Internal != hostIn || r.from == client.addr() && r.nat.Internal != clientIn {
			t.Fatalf("request %+v from %v", r.nat, r.from)
		}
	}
	e.NatIntroduce(hostIn, host.addr(), clientIn, client.addr(), []byte("r1_00ff_7"))
	check := func(r *rawConn, wantIn, wantEx netip.AddrPort) {
		t.Helper()
		var got []NatPacket
		if err := ParseNat(r.mustRecv(wait), func(n NatPacket) { got = append(got, n) }); err != nil || len(got) != 1 {
			t.Fatalf("response %v %+v", err, got)
		}
		if n := got[0]; n.Kind != NatResponse || n.Internal != wantIn || n.External != wantEx || string(n.Token) != "r1_00ff_7" {
			t.Fatalf("response %+v", n)
		}
	}
	check(client, hostIn, host.addr())
	check(host, clientIn, client.addr())
}
