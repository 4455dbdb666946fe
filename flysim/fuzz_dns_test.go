package flysim

import (
	"log/slog"
	"net"
	"strconv"
	"testing"

	"github.com/miekg/dns"
)

// FuzzDNSQuery: the .internal zone's DNS server (miekg/dns parses the
// query, our handler answers it). For any query bytes that unpack, the
// answer is one message that packs, with the query's id, marked a
// response; over UDP it fits 512 bytes, or the query's EDNS0 size.
func FuzzDNSQuery(f *testing.F) {
	for _, q := range []struct {
		name string
		t    uint16
	}{
		{"vms.web.internal.", dns.TypeTXT}, {"all.vms.web.internal.", dns.TypeTXT}, {"regions.web.internal.", dns.TypeTXT},
		{"web.internal.", dns.TypeA}, {"ams.web.internal.", dns.TypeAAAA}, {"top2.nearest.of.web.internal.", dns.TypeA},
		{"148e21dad76789.vm.web.internal.", dns.TypeA}, {"_apps.internal.", dns.TypeTXT}, {"_instances.internal.", dns.TypeTXT},
		{"top0.nearest.of.web.internal.", dns.TypeANY}, {"example.com.", dns.TypeA}, {"nope.internal.", dns.TypeTXT},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.t)
		b, _ := m.Pack()
		f.Add(b, false)
		m.SetEdns0(4096, false)
		b, _ = m.Pack()
		f.Add(b, true)
	}
	cfg := &Config{Images: map[string]*Image{"x": {Command: []string{"x"}}}, Apps: []*AppConfig{{Name: "web", InternalPort: 8080}}}
	s, err := New(cfg, Options{Executable: "/bin/true", LogDir: f.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	// Machines in two regions, one stopped, and enough of them that an
	// answer may need truncating.
	a := s.apps["web"]
	for i := range 40 {
		m := &machine{app: a, id: "148e21dad767" + string(rune('a'+i/26)) + string(rune('a'+i%26)), ip: "127.0.0." + strconv.Itoa(i+2),
			region: []string{"ams", "sea"}[i%2], state: StateStarted}
		if i == 3 {
			m.state = StateStopped
		}
		a.machines[m.id] = m
		a.order = append(a.order, m)
	}
	d := &dnsServer{s: s}
	f.Fuzz(func(t *testing.T, b []byte, udp bool) {
		req := new(dns.Msg)
		if req.Unpack(b) != nil {
			return // miekg/dns answers FORMERR itself
		}
		w := &dnsWriter{udp: udp}
		d.serve(w, req)
		if len(w.out) != 1 {
			t.Fatalf("%d answers", len(w.out))
		}
		resp := w.out[0]
		wire, err := resp.Pack()
		if err != nil {
			t.Fatalf("answer does not pack: %v", err)
		}
		if resp.Id != req.Id || !resp.Response {
			t.Fatalf("answer %v to %v", resp.MsgHdr, req.MsgHdr)
		}
		if udp {
			limit := dns.MinMsgSize
			if o := req.IsEdns0(); o != nil {
				limit = max(int(o.UDPSize()), dns.MinMsgSize)
			}
			if len(wire) > limit {
				t.Fatalf("%d-byte UDP answer, limit %d", len(wire), limit)
			}
		}
	})
}

// dnsWriter is a dns.ResponseWriter that keeps the messages written.
type dnsWriter struct {
	udp bool
	out []*dns.Msg
}

func (w *dnsWriter) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (w *dnsWriter) RemoteAddr() net.Addr {
	if w.udp {
		return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}
	}
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}
}
func (w *dnsWriter) Network() string {
	if w.udp {
		return "udp"
	}
	return "tcp"
}
func (w *dnsWriter) WriteMsg(m *dns.Msg) error { w.out = append(w.out, m); return nil }
func (w *dnsWriter) Write([]byte) (int, error) { return 0, nil }
func (w *dnsWriter) Close() error              { return nil }
func (w *dnsWriter) TsigStatus() error         { return nil }
func (w *dnsWriter) TsigTimersOnly(bool)       {}
func (w *dnsWriter) Hijack()                   {}
