package flysim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// DNSTTL is the TTL of every answer, Fly's documented example value.
const DNSTTL = 5

// dnsServer answers the .internal zone from the Sim's live machine records,
// over UDP and TCP on one address.
type dnsServer struct {
	s    *Sim
	addr string
	udp  *dns.Server
	tcp  *dns.Server
	wg   sync.WaitGroup // the two serve goroutines; DNS outlives the machines at Close
}

func startDNS(s *Sim, addr string) (*dnsServer, error) {
	var pc net.PacketConn
	var ln net.Listener
	var err error
	// With port 0 the UDP and TCP ports must still match: retry a few times.
	for tries := 0; tries < 10; tries++ {
		pc, err = net.ListenPacket("udp", addr)
		if err != nil {
			return nil, fmt.Errorf("failed to bind DNS (udp) on %s: %w", addr, err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		_ = pc.Close()
		if !strings.HasSuffix(addr, ":0") {
			return nil, fmt.Errorf("failed to bind DNS (tcp) on %s: %w", addr, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("failed to bind DNS on %s: %w", addr, err)
	}
	d := &dnsServer{s: s, addr: pc.LocalAddr().String()}
	h := dns.HandlerFunc(d.serve)
	d.udp = &dns.Server{PacketConn: pc, Handler: h, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
	d.tcp = &dns.Server{Listener: ln, Handler: h, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		IdleTimeout: func() time.Duration { return 5 * time.Second }}
	for _, srv := range []*dns.Server{d.udp, d.tcp} {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := srv.ActivateAndServe(); err != nil && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("dns server stopped", "err", err)
			}
		}()
	}
	return d, nil
}

func (d *dnsServer) close(ctx context.Context) error {
	err := errors.Join(d.udp.ShutdownContext(ctx), d.tcp.ShutdownContext(ctx))
	d.wg.Wait()
	if err != nil {
		return fmt.Errorf("failed to shut DNS down: %w", err)
	}
	return nil
}

// dnsMachine is the part of a machine record DNS needs.
type dnsMachine struct {
	id, region, ip string
	started        bool
}

func (d *dnsServer) serve(w dns.ResponseWriter, req *dns.Msg) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	rrs, rcode := d.answer(q)
	resp.Rcode = rcode
	resp.Answer = rrs
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		resp.Truncate(dns.MinMsgSize)
		if o := req.IsEdns0(); o != nil {
			resp.Truncate(int(o.UDPSize()))
		}
	}
	_ = w.WriteMsg(resp)
}

// answer resolves one question of the .internal zone:
//
//	vms.<app>.internal              TXT  "<id> <region>,..." (started machines)
//	all.vms.<app>.internal          TXT  the same for every machine
//	regions.<app>.internal          TXT  "<region>,..." (regions with a started machine)
//	<id>.vm.<app>.internal          A    the machine's address (any state but destroyed)
//	<app>.internal                  A    started machines
//	<region>.<app>.internal         A    started machines in region
//	top<N>.nearest.of.<app>.internal A   N started machines
//	_apps.internal                  TXT  app names
//	_instances.internal             TXT  instance=<id>,app=<a>,ip=<ip>,region=<r>;...
//
// AAAA questions get the IPv4-mapped form (::ffff:127.0.0.x) of the same
// addresses, so code written for Fly's IPv6-only 6PN works unchanged.
func (d *dnsServer) answer(q dns.Question) ([]dns.RR, int) {
	name := strings.ToLower(dns.Fqdn(q.Name))
	if !strings.HasSuffix(name, ".internal.") {
		return nil, dns.RcodeRefused
	}
	labels := strings.Split(strings.TrimSuffix(name, ".internal."), ".")
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: DNSTTL}
	}
	txt := func(s string) []dns.RR {
		if s == "" { // nothing to list: no record (NODATA), not an empty string
			return nil
		}
		return []dns.RR{&dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: splitTXT(s)}}
	}
	addrs := func(ms []dnsMachine) []dns.RR {
		var out []dns.RR
		for _, m := range ms {
			ip := net.ParseIP(m.ip)
			switch q.Qtype {
			case dns.TypeA, dns.TypeANY:
				out = append(out, &dns.A{Hdr: hdr(dns.TypeA), A: ip.To4()})
			case dns.TypeAAAA:
				out = append(out, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: ip.To16()})
			}
		}
		return out
	}
	wantTXT := q.Qtype == dns.TypeTXT || q.Qtype == dns.TypeANY
	wantAddr := q.Qtype == dns.TypeA || q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY

	if len(labels) == 1 && labels[0] == "_apps" {
		names := d.s.appNames()
		return onlyIf(wantTXT, txt(strings.Join(names, ","))), dns.RcodeSuccess
	}
	if len(labels) == 1 && labels[0] == "_instances" {
		var parts []string
		for _, app := range d.s.appNames() {
			ms, _ := d.s.dnsMachines(app)
			for _, m := range ms {
				if m.started {
					parts = append(parts, fmt.Sprintf("instance=%s,app=%s,ip=%s,region=%s", m.id, app, m.ip, m.region))
				}
			}
		}
		return onlyIf(wantTXT, txt(strings.Join(parts, ";"))), dns.RcodeSuccess
	}
	app := labels[len(labels)-1]
	ms, ok := d.s.dnsMachines(app)
	if !ok {
		return nil, dns.RcodeNameError
	}
	started := filter(ms, func(m dnsMachine) bool { return m.started })
	sub := labels[:len(labels)-1]
	switch {
	case len(sub) == 0:
		return onlyIf(wantAddr, addrs(started)), dns.RcodeSuccess
	case len(sub) == 1 && sub[0] == "vms":
		return onlyIf(wantTXT, txt(vmList(started))), dns.RcodeSuccess
	case len(sub) == 2 && sub[0] == "all" && sub[1] == "vms":
		return onlyIf(wantTXT, txt(vmList(ms))), dns.RcodeSuccess
	case len(sub) == 1 && sub[0] == "regions":
		seen := map[string]bool{}
		var regions []string
		for _, m := range started {
			if !seen[m.region] {
				seen[m.region] = true
				regions = append(regions, m.region)
			}
		}
		sort.Strings(regions)
		return onlyIf(wantTXT, txt(strings.Join(regions, ","))), dns.RcodeSuccess
	case len(sub) == 2 && sub[1] == "vm":
		one := filter(ms, func(m dnsMachine) bool { return m.id == sub[0] })
		if len(one) == 0 {
			return nil, dns.RcodeNameError
		}
		return onlyIf(wantAddr, addrs(one)), dns.RcodeSuccess
	case len(sub) == 3 && sub[1] == "nearest" && sub[2] == "of" && strings.HasPrefix(sub[0], "top"):
		n, err := strconv.Atoi(strings.TrimPrefix(sub[0], "top"))
		if err != nil || n <= 0 {
			return nil, dns.RcodeNameError
		}
		return onlyIf(wantAddr, addrs(started[:min(n, len(started))])), dns.RcodeSuccess
	case len(sub) == 1 && regionRE.MatchString(sub[0]):
		in := filter(started, func(m dnsMachine) bool { return m.region == sub[0] })
		return onlyIf(wantAddr, addrs(in)), dns.RcodeSuccess
	}
	return nil, dns.RcodeNameError
}

func onlyIf(ok bool, rrs []dns.RR) []dns.RR {
	if !ok {
		return nil
	}
	return rrs
}

func filter(ms []dnsMachine, keep func(dnsMachine) bool) []dnsMachine {
	var out []dnsMachine
	for _, m := range ms {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

func vmList(ms []dnsMachine) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.id + " " + m.region
	}
	return strings.Join(parts, ",")
}

// splitTXT cuts a long value into the 255-byte strings a TXT record holds
// (a reader joins them, as on Fly).
func splitTXT(s string) []string {
	var out []string
	for len(s) > 255 {
		out = append(out, s[:255])
		s = s[255:]
	}
	return append(out, s)
}

func (s *Sim) appNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.order))
	for _, a := range s.order {
		if a.created { // a reserved app is unknown until created
			names = append(names, a.cfg.Name)
		}
	}
	return names
}

// dnsMachines snapshots an app's machines sorted by id, as DNS answers
// them: live, or frozen by a NetDNSStale fault.
func (s *Sim) dnsMachines(appName string) ([]dnsMachine, bool) {
	s.mu.Lock()
	st := s.dnsStale[appName]
	if st != nil && s.clk.Now().Before(st.until) {
		s.mu.Unlock()
		return append([]dnsMachine(nil), st.ms...), true
	}
	if st != nil {
		delete(s.dnsStale, appName)
	}
	s.mu.Unlock()
	return s.liveDNSMachines(appName)
}

// liveDNSMachines snapshots an app's live machines sorted by id.
func (s *Sim) liveDNSMachines(appName string) ([]dnsMachine, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.existingAppLocked(appName)
	if a == nil {
		return nil, false
	}
	var out []dnsMachine
	now := s.clk.Now()
	for _, m := range a.order {
		if m.state == StateDestroyed || m.state == StateDestroying {
			continue
		}
		out = append(out, dnsMachine{id: m.id, region: m.region, ip: m.ip, started: s.dnsListedLocked(m, now)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, true
}
