package flyaffinity

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeDNS is a real miekg/dns server on 127.0.0.1 (UDP and TCP on one port)
// answering TXT queries with records the test changes at run time.
type fakeDNS struct {
	tb      testing.TB
	addr    string
	queries atomic.Int64 // questions answered (or dropped)

	mu      sync.Mutex
	records [][]string // guarded by mu: one TXT record per element, each a list of strings
	rcode   int        // guarded by mu: answer code (dns.RcodeSuccess normally)
	drop    bool       // guarded by mu: read questions but never answer
	delay   time.Duration
	servers []*dns.Server // guarded by mu: running servers (empty while stopped)
}

// startDNS starts a fake DNS server answering with the machines listed in
// value (the single TXT string).
func startDNS(tb testing.TB, value string) *fakeDNS {
	tb.Helper()
	f := &fakeDNS{tb: tb, records: [][]string{splitTXT(value)}}
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("failed to listen on UDP: %v", err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			if attempt < 10 {
				continue // the TCP port was taken: pick another pair
			}
			tb.Fatalf("failed to listen on TCP: %v", err)
		}
		f.addr = pc.LocalAddr().String()
		f.serve(pc, l)
		break
	}
	tb.Cleanup(f.stop)
	return f
}

func (f *fakeDNS) serve(pc net.PacketConn, l net.Listener) {
	f.tb.Helper()
	mux := dns.HandlerFunc(f.handle)
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: mux}, {Listener: l, Handler: mux}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			f.tb.Fatal("fake DNS server did not start")
		}
		f.mu.Lock()
		f.servers = append(f.servers, srv)
		f.mu.Unlock()
	}
}

// stop shuts the servers down: queries to the address are then refused.
func (f *fakeDNS) stop() {
	f.mu.Lock()
	servers := f.servers
	f.servers = nil
	f.mu.Unlock()
	for _, s := range servers {
		_ = s.Shutdown()
	}
}

// restart serves again on the same address after stop.
func (f *fakeDNS) restart() {
	f.tb.Helper()
	pc, err := net.ListenPacket("udp", f.addr)
	if err != nil {
		f.tb.Fatalf("failed to listen on UDP again: %v", err)
	}
	l, err := net.Listen("tcp", f.addr)
	if err != nil {
		pc.Close()
		f.tb.Fatalf("failed to listen on TCP again: %v", err)
	}
	f.serve(pc, l)
}

// set replaces the answer by one TXT record holding value, split into
// 255-byte strings as Fly does.
func (f *fakeDNS) set(value string) { f.setRecords(splitTXT(value)) }

// splitTXT splits a TXT value into the 255-byte character strings DNS
// carries (possibly inside an entry).
func splitTXT(value string) []string {
	parts := []string{}
	for len(value) > 255 {
		parts = append(parts, value[:255])
		value = value[255:]
	}
	return append(parts, value)
}

// setRecords replaces the answer by records, one TXT record each, every
// record a list of character strings.
func (f *fakeDNS) setRecords(records ...[]string) {
	f.mu.Lock()
	f.records, f.rcode, f.drop = records, dns.RcodeSuccess, false
	f.mu.Unlock()
}

func (f *fakeDNS) setRcode(rcode int) {
	f.mu.Lock()
	f.rcode = rcode
	f.mu.Unlock()
}

func (f *fakeDNS) setDrop(drop bool) {
	f.mu.Lock()
	f.drop = drop
	f.mu.Unlock()
}

func (f *fakeDNS) setDelay(d time.Duration) {
	f.mu.Lock()
	f.delay = d
	f.mu.Unlock()
}

func (f *fakeDNS) handle(w dns.ResponseWriter, req *dns.Msg) {
	f.queries.Add(1)
	f.mu.Lock()
	records, rcode, drop, delay := f.records, f.rcode, f.drop, f.delay
	f.mu.Unlock()
	if drop {
		return
	}
	if delay > 0 {
		time.Sleep(delay) // wall clock: a slow resolver on a real socket (RouteWait and LookupTimeout are wall-clock bounds)
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Rcode = rcode
	if rcode == dns.RcodeSuccess && len(req.Question) == 1 && req.Question[0].Qtype == dns.TypeTXT {
		for _, strs := range records {
			m.Answer = append(m.Answer, &dns.TXT{
				Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 5},
				Txt: strs,
			})
		}
	}
	if w.RemoteAddr().Network() == "udp" {
		size := dns.MinMsgSize
		if o := req.IsEdns0(); o != nil {
			size = int(o.UDPSize())
		}
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
}

// machineIDs returns n distinct, realistic (14 hex digit) machine ids.
func machineIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%014x", uint64(0x148e21dad76789)+uint64(i)*0x9e3779b97f4a7)
	}
	return ids
}

// txtValue is the TXT value Fly would publish for ids.
func txtValue(ids ...string) string {
	regions := []string{"sea", "ams", "fra", "nrt"}
	v := ""
	for i, id := range ids {
		if i > 0 {
			v += ","
		}
		v += id + " " + regions[i%len(regions)]
	}
	return v
}

// testConfig is a Config against f for machine self with a private registry
// and a discarding logger.
func testConfig(f *fakeDNS, self string) Config {
	return Config{
		App:       "purr-relay",
		Self:      self,
		TTL:       5 * time.Second,
		DNSServer: f.addr,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:   prometheus.NewRegistry(),
	}
}

// newTestResolver builds a Resolver from cfg and closes it at cleanup.
func newTestResolver(tb testing.TB, cfg Config) *Resolver {
	tb.Helper()
	r := NewWithConfig(cfg)
	tb.Cleanup(r.Close)
	return r
}

// counter reads a counter of reg by name and one label pair ("" for none).
func counter(tb testing.TB, reg prometheus.Gatherer, name, label, value string) float64 {
	tb.Helper()
	fams, err := reg.Gather()
	if err != nil {
		tb.Fatalf("failed to gather metrics: %v", err)
	}
	for _, fam := range fams {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			if label == "" {
				return m.GetCounter().GetValue()
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// logRecorder is a slog.Handler that keeps every record's level and message.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record // guarded by mu
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r)
	l.mu.Unlock()
	return nil
}

// count returns how many records at level have a message containing text.
func (l *logRecorder) count(level slog.Level, text string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if r.Level == level && strings.Contains(r.Message, text) {
			n++
		}
	}
	return n
}
