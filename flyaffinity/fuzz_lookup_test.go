package flyaffinity

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// FuzzLookupAnswer feeds arbitrary DNS answer bytes (over UDP, and over
// TCP when they say truncated) to the resolver's TXT lookup, from a fake
// server started once that copies the question's id into them. Nothing
// panics, a lookup ends within its timeout, and a successful one returns
// 1 to maxMachines valid machine ids that the answer carries.
func FuzzLookupAnswer(f *testing.F) {
	for _, txt := range [][]string{{"148e21dad76789 sea,4d89699c030518 ams"}, {"a1 sea", "b2 ams"}, {"bogus"}, {}} {
		m := new(dns.Msg)
		m.SetQuestion("vms.app.internal.", dns.TypeTXT)
		r := new(dns.Msg)
		r.SetReply(m)
		if len(txt) > 0 {
			r.Answer = append(r.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: "vms.app.internal.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 5}, Txt: txt})
		}
		b, err := r.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		r.Truncated = true
		b, _ = r.Pack()
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0x81, 0x83, 0, 0, 0, 0, 0, 0, 0, 0}) // NXDOMAIN, nothing else
	f.Add([]byte{})

	srv := startRawDNS(f)
	r := NewWithConfig(Config{App: "app", Self: "self", DNSServer: srv.addr, LookupTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	f.Cleanup(r.Close)
	f.Fuzz(func(t *testing.T, answer []byte) {
		srv.set(answer)
		start := time.Now() // wall clock: LookupTimeout bounds a real DNS socket
		ids, _, err := r.lookup(context.Background())
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("lookup took %v", d)
		}
		if err != nil {
			return
		}
		if len(ids) == 0 || len(ids) > maxMachines {
			t.Fatalf("%d ids", len(ids))
		}
		// The ids come from the answer's TXT records (the id bytes do not
		// matter to unpacking).
		m := new(dns.Msg)
		if err := m.Unpack(answer); err != nil {
			t.Fatalf("lookup accepted %x, which does not unpack: %v", answer, err)
		}
		var txt []string
		for _, rr := range m.Answer {
			if x, ok := rr.(*dns.TXT); ok {
				txt = append(txt, strings.Join(x.Txt, ""))
			}
		}
		carried := strings.Join(txt, "\x00")
		for _, id := range ids {
			if !validToken(id) || !strings.Contains(carried, id) {
				t.Fatalf("id %q from %q", id, carried)
			}
		}
	})
}

// rawDNS answers every question on 127.0.0.1 (UDP and TCP, one port) with
// the bytes set last, their id replaced by the question's.
type rawDNS struct {
	addr string
	pc   net.PacketConn
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	ans  []byte
}

func (d *rawDNS) set(b []byte) { d.mu.Lock(); d.ans = b; d.mu.Unlock() }

func (d *rawDNS) reply(q []byte) []byte {
	d.mu.Lock()
	b := bytes.Clone(d.ans)
	d.mu.Unlock()
	if len(b) >= 2 && len(q) >= 2 {
		copy(b, q[:2])
	}
	return b
}

func startRawDNS(tb testing.TB) *rawDNS {
	tb.Helper()
	d := &rawDNS{}
	var err error
	for range 10 {
		if d.pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			tb.Fatal(err)
		}
		if d.ln, err = net.Listen("tcp", d.pc.LocalAddr().String()); err == nil {
			break
		}
		d.pc.Close()
	}
	if err != nil {
		tb.Fatal(err)
	}
	d.addr = d.pc.LocalAddr().String()
	d.wg.Add(2)
	go func() {
		defer d.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, from, err := d.pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = d.pc.WriteTo(d.reply(buf[:n]), from)
		}
	}()
	go func() {
		defer d.wg.Done()
		for {
			c, err := d.ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(2 * time.Second)) // wall clock: a real socket's deadline
			var n [2]byte
			q := make([]byte, 512)
			if _, err := io.ReadFull(c, n[:]); err == nil {
				q = q[:min(int(binary.BigEndian.Uint16(n[:])), len(q))]
				if _, err := io.ReadFull(c, q); err == nil {
					b := d.reply(q)
					_, _ = c.Write(binary.BigEndian.AppendUint16(nil, uint16(min(len(b), 0xffff))))
					_, _ = c.Write(b)
				}
			}
			c.Close()
		}
	}()
	tb.Cleanup(func() {
		d.pc.Close()
		d.ln.Close()
		d.wg.Wait()
	})
	return d
}
