package flyaffinity

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// Started looks up the app's started machines now (no cache: a caller
// deciding who serves wants the current answer), this machine excluded.
func (r *Resolver) Started(ctx context.Context) ([]string, error) {
	ids, _, err := r.lookup(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return slices.DeleteFunc(ids, func(id string) bool { return id == r.cfg.Self }), nil
}

// MachineURL is http://<address>:<PeerPort> of machine id, its address
// read from <id>.vm.<app>.internal (AAAA; an IPv4-mapped answer, as flysim
// gives, is dialled as IPv4). The name resolves whatever the machine's
// state: whether it answers is the caller's question.
func (r *Resolver) MachineURL(ctx context.Context, id string) (string, error) {
	if !validToken(id) {
		return "", fmt.Errorf("bad machine id %q", id)
	}
	name := id + ".vm." + r.cfg.App + ".internal."
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeAAAA)
	in, err := r.exchange(ctx, "udp", m)
	if err != nil {
		return "", fmt.Errorf("failed to look up AAAA %s at %s: %w", name, r.cfg.DNSServer, err)
	}
	for _, rr := range in.Answer {
		if a, ok := rr.(*dns.AAAA); ok {
			if ip, ok := netip.AddrFromSlice(a.AAAA); ok {
				return "http://" + netip.AddrPortFrom(ip.Unmap(), uint16(r.cfg.PeerPort)).String(), nil
			}
		}
	}
	return "", fmt.Errorf("failed to look up AAAA %s at %s: %s, no address", name, r.cfg.DNSServer, dns.RcodeToString[in.Rcode])
}
