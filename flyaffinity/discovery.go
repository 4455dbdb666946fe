package flyaffinity

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/miekg/dns"
)

// Limits on what a DNS answer may make us hold.
const (
	maxMachines  = 1024     // entries kept from one answer
	maxTokenLen  = 64       // bytes of a machine id or a region
	ednsUDPSize  = 4096     // advertised UDP answer size
	maxTXTLength = 64 << 10 // bytes of one joined TXT value
)

// errNoEntries is a lookup whose answer held no usable machine entry.
var errNoEntries = errors.New("no usable machine entry")

// lookup asks DNS for the started machines of the app and returns their ids
// (unsorted, possibly with duplicates) and the number of entries skipped as
// malformed. The answer travels over UDP and, when truncated, again over TCP.
func (r *Resolver) lookup(ctx context.Context) (ids []string, skipped int, err error) {
	m := new(dns.Msg)
	m.SetQuestion(r.qname, dns.TypeTXT)
	m.SetEdns0(ednsUDPSize, false)
	in, err := r.exchange(ctx, "udp", m)
	if err == nil && in.Truncated {
		in, err = r.exchange(ctx, "tcp", m)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("failed to look up TXT %s at %s: %w", r.qname, r.cfg.DNSServer, err)
	}
	if in.Rcode != dns.RcodeSuccess {
		return nil, 0, fmt.Errorf("failed to look up TXT %s at %s: answer %s", r.qname, r.cfg.DNSServer, dns.RcodeToString[in.Rcode])
	}
	var values []string
	for _, rr := range in.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			values = append(values, strings.Join(txt.Txt, ""))
		}
	}
	ids, skipped = parseMachines(values)
	if len(ids) == 0 {
		return nil, skipped, fmt.Errorf("failed to look up TXT %s at %s: %w (%d records, %d skipped entries)",
			r.qname, r.cfg.DNSServer, errNoEntries, len(values), skipped)
	}
	return ids, skipped, nil
}

// exchange sends m over network and reads the answer. miekg/dns honours only
// the context's deadline, so cancellation (Close) closes the connection.
func (r *Resolver) exchange(ctx context.Context, network string, m *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: r.cfg.LookupTimeout, UDPSize: ednsUDPSize}
	conn, err := c.DialContext(ctx, r.cfg.DNSServer)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	in, _, err := c.ExchangeWithConnContext(ctx, m, conn)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, net.ErrClosed) {
			return nil, cerr
		}
		return nil, err
	}
	return in, nil
}

// parseMachines parses TXT values of the form "<id> <region>,<id> <region>"
// (the record's strings already joined) into machine ids. An entry that is not
// exactly two tokens of letters, digits and '-' is skipped and counted; empty
// entries (a trailing comma) are ignored silently.
func parseMachines(values []string) (ids []string, skipped int) {
	for _, v := range values {
		if len(v) > maxTXTLength {
			skipped++
			continue
		}
		for entry := range strings.SplitSeq(v, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			f := strings.Fields(entry)
			if len(f) != 2 || !validToken(f[0]) || !validToken(f[1]) || len(ids) >= maxMachines {
				skipped++
				continue
			}
			ids = append(ids, f[0])
		}
	}
	return ids, skipped
}

// validToken reports whether s is a plausible machine id or region: 1 to
// maxTokenLen letters, digits and '-'.
func validToken(s string) bool {
	if s == "" || len(s) > maxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
